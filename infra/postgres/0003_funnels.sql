-- Saved funnels: a name and 2..10 ordered steps (page patterns or custom events), kept as the
-- API takes them. A site's funnels go with the site.
create table funnels (
  funnel_id   integer generated always as identity primary key,
  site_id     integer not null references sites (site_id) on delete cascade,
  name        text not null,
  steps       jsonb not null,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index funnels_site_idx on funnels (site_id);
