import { z } from 'zod';

/** A site's domain: a host name (or `localhost`), trimmed and lowercased. */
export const domainSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(
    /^(?=.{1,253}$)(localhost|([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63})$/,
    'not a domain name',
  );
