export { isbot } from 'isbot';
export * from './channel';
export * from './geo';
export * from './identity';
export * from './ip';
export * from './url';
export * from './useragent';
