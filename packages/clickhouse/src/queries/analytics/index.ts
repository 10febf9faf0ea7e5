export * from './buckets';
export * from './export';
export * from './live';
export * from './metric';
export * from './overview';
export * from './sessions';
export * from './shared';
export * from './users';
