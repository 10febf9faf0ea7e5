import './style.css';
import { ApiError, apiKey, get, hasPrivateKey, rememberPrivateKey } from './api';
import { h, replace } from './dom';
import { renderSettings } from './settings';
import { renderSite } from './site';
import type { Site, UserOrganization } from './types';

const root = document.getElementById('app')!;

export function navigate(path: string): void {
  history.pushState(null, '', path);
  void route();
}

function header(): HTMLElement {
  const signedIn = apiKey.get() !== null;
  return h(
    'header',
    { class: 'top' },
    h('a', { href: '/', class: 'brand', onclick: link('/') }, 'trackhouse'),
    signedIn
      ? h('button', { type: 'button', class: 'quiet', onclick: signOut }, 'Sign out')
      : h('a', { href: '/', onclick: link('/') }, 'Sign in'),
  );
}

function link(path: string): EventListener {
  return (e) => {
    e.preventDefault();
    navigate(path);
  };
}

function signOut(): void {
  apiKey.clear();
  navigate('/');
}

function signInForm(message?: string): HTMLElement {
  const input = h('input', {
    id: 'api-key',
    name: 'api-key',
    type: 'password',
    autocomplete: 'off',
    required: true,
    spellcheck: 'false',
  });
  const form = h(
    'form',
    { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    message ? h('p', { class: 'error', role: 'alert' }, message) : null,
    h('button', { type: 'submit' }, 'Sign in'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    apiKey.set(input.value.trim());
    void route();
  });
  return form;
}

async function renderHome(main: HTMLElement): Promise<void> {
  if (!apiKey.get()) {
    replace(main, signInForm());
    return;
  }
  replace(main, h('p', { class: 'muted' }, 'Loading sites…'));
  try {
    const orgs = (await get<{ data: UserOrganization[] }>('/api/user/organizations')).data;
    const lists = await Promise.all(
      orgs.map(async (o) => ({
        org: o,
        sites: (await get<{ data: Site[] }>(`/api/organizations/${encodeURIComponent(o.id)}/sites`)).data,
      })),
    );
    replace(
      main,
      h('h1', {}, 'Your sites'),
      lists.length === 0 ? h('p', {}, 'This key belongs to no organization yet.') : null,
      lists.map(({ org, sites }) =>
        h(
          'section',
          { class: 'card' },
          h('h2', {}, org.name, ' ', h('span', { class: 'badge' }, org.role)),
          sites.length === 0
            ? h('p', { class: 'muted' }, 'No sites yet.')
            : h(
                'ul',
                { class: 'sites' },
                sites.map((s) =>
                  h(
                    'li',
                    {},
                    h('a', { href: `/sites/${s.siteId}`, onclick: link(`/sites/${s.siteId}`) }, s.name),
                    ' ',
                    h('span', { class: 'muted' }, s.domain),
                    s.public ? h('span', { class: 'badge' }, 'public') : null,
                  ),
                ),
              ),
        ),
      ),
    );
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      apiKey.clear();
      replace(main, signInForm('That API key was not accepted.'));
    } else replace(main, h('p', { class: 'error', role: 'alert' }, (err as Error).message));
  }
}

async function route(): Promise<void> {
  const main = h('main', {});
  replace(root, header(), main);
  const match = /^\/sites\/(\d{1,10})(\/settings)?\/?$/.exec(location.pathname);
  if (!match) return renderHome(main);
  const siteId = Number(match[1]);
  if (match[2]) {
    return renderSettings(main, siteId, {
      onUnauthorized: () => replace(main, signInForm('Sign in to change this site’s settings.')),
      link,
    });
  }
  // A private link's key is moved out of the address bar (and so out of history and referrers).
  const url = new URL(location.href);
  const key = url.searchParams.get('private_key');
  if (key) {
    rememberPrivateKey(siteId, key);
    url.searchParams.delete('private_key');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }
  return renderSite(main, siteId, {
    onUnauthorized: () =>
      replace(
        main,
        signInForm(
          hasPrivateKey(siteId) && !apiKey.get()
            ? 'This private link no longer works: it was revoked or replaced. Sign in to see this site.'
            : 'Sign in to see this site.',
        ),
      ),
    link,
  });
}

window.addEventListener('popstate', () => void route());
void route();
