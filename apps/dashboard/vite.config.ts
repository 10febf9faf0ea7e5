import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    target: 'es2022',
    // Assets are served with hashed names and cached for a year; index.html is never cached.
    assetsDir: 'assets',
    reportCompressedSize: false,
    modulePreload: { polyfill: false },
  },
});
