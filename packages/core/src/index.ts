export * from './config';
export * from './errors';
export * from './http';
export * from './ids';
export * from './logger';
export * from './time';
export * from './validation';
