export * from './database';
export * from './embedded';
export * from './migrate';
export * from './repos/api-keys';
export * from './repos/goals';
export * from './repos/organizations';
export * from './repos/sites';
export * from './repos/users';
