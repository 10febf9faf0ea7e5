export * from './app';
export * from './summaries';
