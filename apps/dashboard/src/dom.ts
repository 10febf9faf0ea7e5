/**
 * Elements built with the DOM API only: visitor-controlled text (paths, referrers, event names)
 * is always a text node, never parsed as HTML.
 */
type Child = Node | string | number | false | null | undefined;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function replace(target: Element, ...children: (Child | Child[])[]): void {
  target.replaceChildren(
    ...children
      .flat()
      .filter((c): c is Node | string | number => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : String(c))),
  );
}

export type Notice = { el: HTMLElement; show: (text: string, ok?: boolean) => void };

/** A line for the outcome of an action: the API's message on failure, in words (not only colour). */
export function notice(): Notice {
  const el = h('p', { class: 'notice', role: 'status', 'aria-live': 'polite' });
  return {
    el,
    show(text, ok = true) {
      el.className = ok ? 'notice ok' : 'notice error';
      el.setAttribute('role', ok ? 'status' : 'alert');
      el.textContent = text;
    },
  };
}
