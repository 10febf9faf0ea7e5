import { get, send } from './api';
import { h, notice, replace } from './dom';
import type { Goal } from './types';

interface GoalInput {
  name: string;
  goalType: 'path' | 'event';
  config: {
    pathPattern?: string;
    eventName?: string;
    eventPropertyKey?: string;
    eventPropertyValue?: string | number;
  };
}

/** What a goal matches, in words: `/pricing`, or `signup` with `plan = pro`. */
export function describeGoal(g: Pick<Goal, 'goalType' | 'config'>): string {
  const c = g.config as GoalInput['config'];
  if (g.goalType === 'path') return `Page ${c.pathPattern}`;
  const property =
    c.eventPropertyKey === undefined
      ? ''
      : ` where ${c.eventPropertyKey} = ${JSON.stringify(c.eventPropertyValue)}`;
  return `Event ${c.eventName}${property}`;
}

/**
 * Goals of a site: listed, created, edited and deleted through the API (any member may, SPEC
 * section 4). The list asks for today only: its conversions are not shown here, only definitions.
 */
export async function renderGoalEditor(card: HTMLElement, siteId: number): Promise<void> {
  const base = `/api/sites/${siteId}/goals`;
  const status = notice();
  const list = h('div', { class: 'goal-list' });
  let editing: Goal | undefined;

  const name = h('input', { id: 'goal-name', required: true, maxlength: 200 });
  const typePath = h('input', {
    id: 'goal-type-path',
    type: 'radio',
    class: 'box',
    name: 'goal-type',
    value: 'path',
    checked: true,
  });
  const typeEvent = h('input', {
    id: 'goal-type-event',
    type: 'radio',
    class: 'box',
    name: 'goal-type',
    value: 'event',
  });
  const pattern = h('input', { id: 'goal-path', placeholder: '/pricing or /docs/**', spellcheck: 'false' });
  const eventName = h('input', { id: 'goal-event', spellcheck: 'false' });
  const propKey = h('input', { id: 'goal-prop-key', spellcheck: 'false' });
  const propValue = h('input', { id: 'goal-prop-value', spellcheck: 'false' });
  const asNumber = h('input', { id: 'goal-prop-number', type: 'checkbox', class: 'box' });
  const pathFields = h(
    'div',
    { class: 'field' },
    h('label', { for: 'goal-path' }, 'Path pattern'),
    pattern,
    h('small', { class: 'muted' }, '* matches one path segment, ** any number.'),
  );
  const eventFields = h(
    'div',
    { class: 'event-fields' },
    h('div', { class: 'field' }, h('label', { for: 'goal-event' }, 'Event name'), eventName),
    h('div', { class: 'field' }, h('label', { for: 'goal-prop-key' }, 'Property (optional)'), propKey),
    h('div', { class: 'field' }, h('label', { for: 'goal-prop-value' }, 'Property value'), propValue),
    h(
      'div',
      { class: 'check' },
      asNumber,
      h('label', { for: 'goal-prop-number' }, 'Compare the value as a number'),
    ),
  );
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Add goal');
  const cancel = h('button', { type: 'button', class: 'quiet', hidden: true }, 'Cancel');
  const formTitle = h('h3', { id: 'goal-form-title' }, 'New goal');
  const showType = () => {
    pathFields.hidden = !typePath.checked;
    eventFields.hidden = typePath.checked;
  };
  typePath.addEventListener('change', showType);
  typeEvent.addEventListener('change', showType);

  const form = h(
    'form',
    { class: 'goal-form', 'aria-labelledby': 'goal-form-title' },
    formTitle,
    h('div', { class: 'field' }, h('label', { for: 'goal-name' }, 'Goal name'), name),
    h(
      'fieldset',
      { class: 'inline' },
      h('legend', {}, 'Converts on'),
      h('span', { class: 'check' }, typePath, h('label', { for: 'goal-type-path' }, 'A page visit')),
      h('span', { class: 'check' }, typeEvent, h('label', { for: 'goal-type-event' }, 'A custom event')),
    ),
    pathFields,
    eventFields,
    h('div', { class: 'row' }, submit, cancel),
  );

  function fill(goal: Goal | undefined): void {
    editing = goal;
    const c = (goal?.config ?? {}) as GoalInput['config'];
    name.value = goal?.name ?? '';
    typePath.checked = goal?.goalType !== 'event';
    typeEvent.checked = goal?.goalType === 'event';
    pattern.value = c.pathPattern ?? '';
    eventName.value = c.eventName ?? '';
    propKey.value = c.eventPropertyKey ?? '';
    propValue.value = c.eventPropertyValue === undefined ? '' : String(c.eventPropertyValue);
    asNumber.checked = typeof c.eventPropertyValue === 'number';
    formTitle.textContent = goal ? `Edit goal “${goal.name}”` : 'New goal';
    submit.textContent = goal ? 'Save goal' : 'Add goal';
    cancel.hidden = !goal;
    showType();
    if (goal) name.focus();
  }
  cancel.addEventListener('click', () => fill(undefined));

  function input(): GoalInput {
    if (typePath.checked)
      return { name: name.value, goalType: 'path', config: { pathPattern: pattern.value } };
    const config: GoalInput['config'] = { eventName: eventName.value };
    // Key and value go together (the API says so when only one is given).
    if (propKey.value !== '' || propValue.value !== '') {
      config.eventPropertyKey = propKey.value;
      config.eventPropertyValue =
        asNumber.checked && propValue.value.trim() !== '' ? Number(propValue.value) : propValue.value;
    }
    return { name: name.value, goalType: 'event', config };
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      if (editing) await send('PUT', `${base}/${editing.goalId}`, input());
      else await send('POST', base, input());
      status.show(editing ? 'Goal saved.' : 'Goal added.');
      fill(undefined);
      await load();
    } catch (err) {
      status.show((err as Error).message, false);
    }
  });

  async function remove(goal: Goal): Promise<void> {
    try {
      await send('DELETE', `${base}/${goal.goalId}`);
      if (editing?.goalId === goal.goalId) fill(undefined);
      status.show(`Goal “${goal.name}” deleted.`);
      await load();
    } catch (err) {
      status.show((err as Error).message, false);
    }
  }

  async function load(): Promise<void> {
    const today = new Date().toISOString().slice(0, 10);
    const goals = (
      await get<{ data: Goal[] }>(
        `${base}?page_size=100&sort=createdAt&order=asc&start_date=${today}&end_date=${today}`,
      )
    ).data;
    replace(
      list,
      goals.length === 0
        ? h('p', { class: 'muted' }, 'No goals yet.')
        : h(
            'ul',
            { class: 'rows goals' },
            goals.map((g) =>
              h(
                'li',
                { 'data-goal': g.goalId },
                h(
                  'span',
                  { class: 'goal-text' },
                  h('strong', {}, g.name),
                  h('span', { class: 'muted' }, describeGoal(g)),
                ),
                h(
                  'span',
                  { class: 'row' },
                  h(
                    'button',
                    {
                      type: 'button',
                      class: 'quiet',
                      'aria-label': `Edit goal ${g.name}`,
                      onclick: () => fill(g),
                    },
                    'Edit',
                  ),
                  h(
                    'button',
                    {
                      type: 'button',
                      class: 'danger',
                      'aria-label': `Delete goal ${g.name}`,
                      onclick: () => void remove(g),
                    },
                    'Delete',
                  ),
                ),
              ),
            ),
          ),
    );
    card.dataset.goals = String(goals.length);
  }

  replace(card, h('h2', { id: 'goal-editor-title' }, 'Goals'), list, form, status.el);
  fill(undefined);
  try {
    await load();
  } catch (err) {
    replace(list, h('p', { class: 'error', role: 'alert' }, (err as Error).message));
  }
}
