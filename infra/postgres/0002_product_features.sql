-- The browser client's features, one switch each (defaults: those the official client and the
-- reference product ship). Errors were always recorded before this migration and the tracking
-- config told browsers so: existing sites keep recording them, new sites start with it off.
alter table sites add column if not exists track_errors boolean not null default true;
alter table sites alter column track_errors set default false;
alter table sites add column if not exists web_vitals boolean not null default false;
alter table sites add column if not exists session_replay boolean not null default false;
alter table sites add column if not exists track_button_clicks boolean not null default false;
alter table sites add column if not exists track_copy boolean not null default false;
alter table sites add column if not exists track_form_interactions boolean not null default false;
alter table sites add column if not exists track_initial_page_view boolean not null default true;
alter table sites add column if not exists track_spa_navigation boolean not null default true;
