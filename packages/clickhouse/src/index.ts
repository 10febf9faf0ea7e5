export * from './client';
export * from './migrate';
