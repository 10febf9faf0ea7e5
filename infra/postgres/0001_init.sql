create table organizations (
  id          text primary key,
  name        text not null,
  created_at  timestamptz not null default now()
);

create table users (
  id          text primary key,
  email       text not null,
  name        text,
  created_at  timestamptz not null default now()
);
create unique index users_email_key on users (lower(email));

create table memberships (
  organization_id text not null references organizations (id) on delete cascade,
  user_id         text not null references users (id) on delete cascade,
  role            text not null check (role in ('owner', 'admin', 'member')),
  created_at      timestamptz not null default now(),
  primary key (organization_id, user_id)
);
create index memberships_user_idx on memberships (user_id);

-- Only a SHA-256 of each key is kept; `prefix` (the first characters) lets people recognise keys.
create table api_keys (
  id            text primary key,
  user_id       text not null references users (id) on delete cascade,
  name          text not null,
  prefix        text not null,
  key_hash      text not null unique,
  created_at    timestamptz not null default now(),
  expires_at    timestamptz,
  revoked_at    timestamptz,
  last_used_at  timestamptz
);
create index api_keys_user_idx on api_keys (user_id);

create table sites (
  site_id                 integer generated always as identity primary key,
  id                      text not null unique,
  organization_id         text not null references organizations (id) on delete cascade,
  name                    text not null,
  domain                  text not null,
  created_by              text references users (id) on delete set null,
  created_at              timestamptz not null default now(),
  updated_at              timestamptz not null default now(),
  public                  boolean not null default false,
  salt_user_ids           boolean not null default false,
  block_bots              boolean not null default true,
  excluded_ips            text[] not null default '{}',
  excluded_countries      text[] not null default '{}',
  track_outbound          boolean not null default true,
  track_url_params        boolean not null default true,
  -- null: the server default (MONTHLY_PAGEVIEW_LIMIT); 0: unlimited.
  monthly_pageview_limit  integer check (monthly_pageview_limit >= 0),
  private_link_key        text unique
);
create index sites_org_idx on sites (organization_id);

create table goals (
  goal_id     integer generated always as identity primary key,
  site_id     integer not null references sites (site_id) on delete cascade,
  name        text not null,
  goal_type   text not null check (goal_type in ('path', 'event')),
  config      jsonb not null,
  created_at  timestamptz not null default now()
);
create index goals_site_idx on goals (site_id);
