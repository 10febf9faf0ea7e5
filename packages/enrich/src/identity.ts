import { createHash, createHmac } from 'node:crypto';

/**
 * Anonymous visitor id: the first 16 hex characters of SHA-256 over a key, the site id, the IP
 * and the user agent. The key is the server secret, or with `saltUserIds` a per-UTC-day salt
 * derived from it (HMAC of the day), so ids rotate daily and cannot be linked across days.
 */
export function createVisitorIds(secret: string) {
  let saltDay = '';
  let salt = '';
  const dailySalt = (day: string) => {
    if (day !== saltDay) {
      salt = createHmac('sha256', secret).update(`trackhouse-daily-salt:${day}`).digest('hex');
      saltDay = day;
    }
    return salt;
  };
  // Visitors send several events: recent ids are remembered by their inputs (bounded).
  const recent = new Map<string, string>();
  return (input: { siteId: number; ip: string; userAgent: string; saltDay?: string }): string => {
    const inputs = `${input.saltDay ?? ''}\u0000${input.siteId}\u0000${input.ip}\u0000${input.userAgent}`;
    let id = recent.get(inputs);
    if (id === undefined) {
      const key = input.saltDay ? dailySalt(input.saltDay) : secret;
      id = createHash('sha256')
        .update(`${key}\u0000${input.siteId}\u0000${input.ip}\u0000${input.userAgent}`)
        .digest('hex')
        .slice(0, 16);
      if (recent.size >= 50_000) recent.delete(recent.keys().next().value as string);
      recent.set(inputs, id);
    }
    return id;
  };
}
