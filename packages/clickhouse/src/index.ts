export * from './client';
export * from './migrate';
export * from './queries/builder';
export * from './queries/events';
export * from './queries/goals';
export * from './rows';
export * from './seed';
