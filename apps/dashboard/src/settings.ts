import { ApiError, apiKey, get, send } from './api';
import { h, notice, replace } from './dom';
import { renderGoalEditor } from './goal-editor';
import type { Site, SiteConfig } from './types';

type Switch = Exclude<
  keyof SiteConfig,
  'public' | 'excludedIPs' | 'excludedCountries' | 'monthlyPageviewLimit'
>;

/** The config's tracking switches, in the order a person reads them, with what each does. */
const SWITCHES: { key: Switch; label: string }[] = [
  { key: 'blockBots', label: 'Ignore bots and crawlers' },
  { key: 'saltUserIds', label: 'Salt user ids (no visitor is followed across days)' },
  { key: 'trackInitialPageView', label: 'Count the first page view' },
  { key: 'trackSpaNavigation', label: 'Count single-page-app navigation' },
  { key: 'trackUrlParams', label: 'Keep URL query parameters' },
  { key: 'trackOutbound', label: 'Track outbound links' },
  { key: 'trackErrors', label: 'Track JavaScript errors' },
  { key: 'webVitals', label: 'Measure web vitals' },
  { key: 'trackButtonClicks', label: 'Track button clicks' },
  { key: 'trackCopy', label: 'Track copied text' },
  { key: 'trackFormInteractions', label: 'Track form interactions' },
  { key: 'sessionReplay', label: 'Record session replays' },
];

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

function field(id: string, label: string, input: HTMLElement, hint?: string): HTMLElement {
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    input,
    hint ? h('small', { class: 'muted', id: `${id}-hint` }, hint) : null,
  );
}

export async function renderSettings(
  main: HTMLElement,
  siteId: number,
  opts: { onUnauthorized: () => void; link: (path: string) => EventListener },
): Promise<void> {
  replace(main, h('p', { class: 'muted' }, 'Loading settings…'));
  if (!apiKey.get()) return opts.onUnauthorized();
  let site: Site;
  let ips: string[];
  let countries: string[];
  try {
    site = await get<Site>(`/api/sites/${siteId}`);
    // The member-level endpoints: a key outside the site's organization is refused here.
    [ips, countries] = await Promise.all([
      get<{ excludedIPs: string[] }>(`/api/sites/${siteId}/excluded-ips`).then((r) => r.excludedIPs),
      get<{ excludedCountries: string[] }>(`/api/sites/${siteId}/excluded-countries`).then(
        (r) => r.excludedCountries,
      ),
    ]);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return opts.onUnauthorized();
    replace(main, h('p', { class: 'error', role: 'alert' }, message(err)));
    return;
  }
  document.title = `Settings · ${site.name} · trackhouse`;
  const back = `/sites/${siteId}`;
  const title = h('h1', {}, 'Settings · ', h('span', { class: 'site-name' }, site.name));
  const siteCard = h('section', { class: 'card', 'aria-labelledby': 'config-title' });
  const exclusions = h('section', { class: 'card', 'aria-labelledby': 'exclusions-title' });
  const privateLink = h('section', { class: 'card', 'aria-labelledby': 'link-title' });
  const goals = h('section', { class: 'card', 'aria-labelledby': 'goal-editor-title' });
  replace(
    main,
    h('div', { class: 'site-head' }, title, h('a', { href: back, onclick: opts.link(back) }, '← Dashboard')),
    // isOwner is the API's word on who may change the config and the private link.
    site.isOwner
      ? null
      : h(
          'p',
          { class: 'readonly-note', id: 'readonly-note' },
          'Read only: only an owner or admin of this organization can change the site, its exclusions ',
          'and its private link. Members can manage goals.',
        ),
    h('div', { class: 'settings' }, siteCard, exclusions, privateLink, goals),
  );
  main.dataset.editable = String(site.isOwner);

  const setSite = (next: Site) => {
    site = next;
    title.lastElementChild!.textContent = next.name;
    renderSiteForm(siteCard, site, async (changes) => {
      await send('PUT', `/api/sites/${siteId}/config`, changes);
      setSite(await get<Site>(`/api/sites/${siteId}`));
    });
  };
  setSite(site);
  renderExclusions(exclusions, site.isOwner, ips, countries, async (changes) => {
    const { config } = await send<{ config: SiteConfig }>('PUT', `/api/sites/${siteId}/config`, changes);
    return config;
  });
  void renderPrivateLink(privateLink, siteId);
  void renderGoalEditor(goals, siteId);
}

function renderSiteForm(
  card: HTMLElement,
  site: Site,
  save: (changes: Partial<SiteConfig> & { name: string; domain: string }) => Promise<void>,
): void {
  const ro = !site.isOwner;
  const name = h('input', {
    id: 'site-name',
    value: site.name,
    required: true,
    maxlength: 200,
    disabled: ro,
  });
  const domain = h('input', {
    id: 'site-domain',
    value: site.domain,
    required: true,
    spellcheck: 'false',
    disabled: ro,
  });
  const isPublic = h('input', {
    id: 'site-public',
    type: 'checkbox',
    class: 'box',
    checked: site.public,
    disabled: ro,
  });
  const limit = h('input', {
    id: 'site-limit',
    type: 'number',
    min: 0,
    step: 1,
    inputmode: 'numeric',
    value: site.monthlyPageviewLimit ?? '',
    disabled: ro,
    'aria-describedby': 'site-limit-hint',
  });
  const switches = SWITCHES.map((s) => ({
    key: s.key,
    input: h('input', {
      id: `switch-${s.key}`,
      type: 'checkbox',
      class: 'box',
      checked: site[s.key],
      disabled: ro,
    }),
    label: s.label,
  }));
  const status = notice();
  const form = h(
    'form',
    { class: 'config', 'aria-labelledby': 'config-title' },
    h('h2', { id: 'config-title' }, 'Site'),
    field('site-name', 'Name', name),
    field('site-domain', 'Domain', domain),
    h(
      'div',
      { class: 'check' },
      isPublic,
      h('label', { for: 'site-public' }, 'Public dashboard (anyone with the address can see it)'),
    ),
    h(
      'fieldset',
      { class: 'switches' },
      h('legend', {}, 'Tracking'),
      switches.map((s) =>
        h('div', { class: 'check' }, s.input, h('label', { for: `switch-${s.key}` }, s.label)),
      ),
    ),
    field('site-limit', 'Monthly pageview limit', limit, 'Empty: the server default. 0: no limit.'),
    ro ? null : h('button', { type: 'submit', class: 'primary' }, 'Save site settings'),
    status.el,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const button = form.querySelector('button[type=submit]') as HTMLButtonElement;
    button.disabled = true;
    try {
      await save({
        name: name.value,
        domain: domain.value,
        public: isPublic.checked,
        monthlyPageviewLimit: limit.value === '' ? null : Number(limit.value),
        ...Object.fromEntries(switches.map((s) => [s.key, s.input.checked])),
      });
      // The form is drawn again from the API's answer; say so in the new one.
      card.querySelector('.notice')?.replaceWith(savedNotice());
    } catch (err) {
      status.show(message(err), false);
      button.disabled = false;
    }
  });
  replace(card, form);
}

function savedNotice(): HTMLElement {
  const n = notice();
  n.show('Saved.');
  return n.el;
}

function renderExclusions(
  card: HTMLElement,
  editable: boolean,
  ips: string[],
  countries: string[],
  save: (changes: Partial<SiteConfig>) => Promise<SiteConfig>,
): void {
  const status = notice();
  const lists = {
    excludedIPs: {
      values: ips,
      title: 'Excluded IP addresses',
      add: 'IP address or CIDR range',
      example: '203.0.113.7 or 10.0.0.0/8',
    },
    excludedCountries: {
      values: countries,
      title: 'Excluded countries',
      add: 'Country code',
      example: 'two letters, like DE',
    },
  } as const;
  type Key = keyof typeof lists;
  const current: Record<Key, string[]> = { excludedIPs: ips, excludedCountries: countries };
  const sections = h('div', { class: 'exclusion-lists' });

  async function change(key: Key, values: string[]): Promise<boolean> {
    try {
      const config = await save({ [key]: values });
      current.excludedIPs = config.excludedIPs;
      current.excludedCountries = config.excludedCountries;
      status.show('Saved.');
      draw();
      return true;
    } catch (err) {
      status.show(message(err), false);
      return false;
    }
  }

  function draw(): void {
    replace(
      sections,
      (Object.keys(lists) as Key[]).map((key) => {
        const l = lists[key];
        const values = current[key];
        const input = h('input', {
          id: `add-${key}`,
          class: 'grow',
          spellcheck: 'false',
          placeholder: l.example,
        });
        const form = h(
          'form',
          { class: 'add-row' },
          h('label', { for: `add-${key}` }, `Add: ${l.add}`),
          h(
            'div',
            { class: 'row' },
            input,
            h('button', { type: 'submit', 'aria-label': `Add ${l.add}` }, 'Add'),
          ),
        );
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          const value = input.value.trim();
          if (value) await change(key, [...values, value]);
        });
        return h(
          'div',
          { class: 'exclusion', 'data-list': key },
          h('h3', {}, l.title),
          values.length === 0
            ? h('p', { class: 'muted' }, 'None.')
            : h(
                'ul',
                { class: 'rows' },
                values.map((v) =>
                  h(
                    'li',
                    { 'data-value': v },
                    h('code', {}, v),
                    editable
                      ? h(
                          'button',
                          {
                            type: 'button',
                            class: 'quiet',
                            'aria-label': `Remove ${v}`,
                            onclick: () =>
                              void change(
                                key,
                                values.filter((x) => x !== v),
                              ),
                          },
                          'Remove',
                        )
                      : null,
                  ),
                ),
              ),
          editable ? form : null,
        );
      }),
    );
  }
  draw();
  replace(
    card,
    h('h2', { id: 'exclusions-title' }, 'Exclusions'),
    h('p', { class: 'muted' }, 'Traffic from these addresses and countries is not recorded.'),
    sections,
    status.el,
  );
}

async function renderPrivateLink(card: HTMLElement, siteId: number): Promise<void> {
  const path = `/api/sites/${siteId}/private-link-config`;
  const heading = h('h2', { id: 'link-title' }, 'Private link');
  const status = notice();
  const draw = (key: string | null) => {
    const url = key ? `${location.origin}/sites/${siteId}?private_key=${encodeURIComponent(key)}` : '';
    const shown = h('input', {
      id: 'private-link',
      class: 'grow',
      readonly: true,
      value: url,
      spellcheck: 'false',
    });
    const act = (action: string, done: string) => async () => {
      try {
        const { data } = await send<{ data: { privateLinkKey: string | null } }>('POST', path, { action });
        draw(data.privateLinkKey);
        status.show(done);
      } catch (err) {
        status.show(message(err), false);
      }
    };
    const copy = async () => {
      try {
        await navigator.clipboard.writeText(url);
      } catch {
        shown.select();
        document.execCommand('copy');
      }
      status.show('Link copied.');
    };
    card.dataset.exists = String(key !== null);
    replace(
      card,
      heading,
      h(
        'p',
        { class: 'link-state' },
        key
          ? 'A private link exists: whoever has it can see this dashboard without signing in.'
          : 'No private link: only members (and anyone, if the site is public) can see the dashboard.',
      ),
      key
        ? h(
            'div',
            { class: 'field' },
            h('label', { for: 'private-link' }, 'Private link address'),
            h(
              'div',
              { class: 'row' },
              shown,
              h('button', { type: 'button', onclick: () => void copy() }, 'Copy link'),
            ),
          )
        : null,
      h(
        'div',
        { class: 'row' },
        h(
          'button',
          {
            type: 'button',
            onclick: act(
              'generate_private_link_key',
              key ? 'New link made; the old one no longer works.' : 'Private link created.',
            ),
          },
          key ? 'Rotate private link' : 'Create private link',
        ),
        key
          ? h(
              'button',
              {
                type: 'button',
                class: 'danger',
                onclick: act('revoke_private_link_key', 'Private link revoked.'),
              },
              'Revoke private link',
            )
          : null,
      ),
      status.el,
    );
  };
  try {
    const { data } = await get<{ data: { privateLinkKey: string | null } }>(path);
    draw(data.privateLinkKey);
  } catch (err) {
    // The API decides who may see the link (owners and admins); its refusal is shown as is.
    card.dataset.exists = 'unknown';
    replace(card, heading, h('p', { class: 'muted', 'data-refused': 'true' }, message(err)));
  }
}
