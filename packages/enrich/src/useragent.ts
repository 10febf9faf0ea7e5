import { isbot } from 'isbot';
import { UAParser } from 'ua-parser-js';

export const DEVICE_TYPES = ['desktop', 'mobile', 'tablet', 'tv', 'console', 'wearable', 'embedded'] as const;
export type DeviceType = (typeof DEVICE_TYPES)[number];

export interface UserAgentInfo {
  browser: string;
  browser_version: string;
  operating_system: string;
  operating_system_version: string;
  device_type: DeviceType;
  /** The user agent is a crawler, monitor or script (npm isbot). */
  isBot: boolean;
}

interface Parsed {
  isBot: boolean;
  browser: string;
  browserMajor: string;
  os: string;
  osVersion: string;
  /** From the parsed device, else the OS family; undefined when neither tells. */
  device: DeviceType | undefined;
}

const PARSED_DEVICE: Record<string, DeviceType> = {
  mobile: 'mobile',
  tablet: 'tablet',
  smarttv: 'tv',
  console: 'console',
  wearable: 'wearable',
  xr: 'wearable',
  embedded: 'embedded',
};

const OS_DEVICE: Record<string, DeviceType> = {
  ios: 'mobile',
  android: 'mobile',
  'windows phone': 'mobile',
  'windows mobile': 'mobile',
  blackberry: 'mobile',
  symbian: 'mobile',
  kaios: 'mobile',
  ipados: 'tablet',
  tizen: 'tv',
  webos: 'tv',
  netrange: 'tv',
  playstation: 'console',
  xbox: 'console',
  nintendo: 'console',
  watchos: 'wearable',
  windows: 'desktop',
  'mac os': 'desktop',
  macos: 'desktop',
  linux: 'desktop',
  ubuntu: 'desktop',
  debian: 'desktop',
  fedora: 'desktop',
  'chromium os': 'desktop',
  'chrome os': 'desktop',
  freebsd: 'desktop',
  openbsd: 'desktop',
  netbsd: 'desktop',
  arch: 'desktop',
  mint: 'desktop',
  gentoo: 'desktop',
  'red hat': 'desktop',
  suse: 'desktop',
  solaris: 'desktop',
};

function parse(ua: string): Parsed {
  const r = new UAParser(ua).getResult();
  const os = r.os.name ?? '';
  return {
    isBot: isbot(ua),
    browser: r.browser.name ?? '',
    browserMajor: r.browser.major ?? '',
    os,
    osVersion: r.os.version ?? '',
    device: (r.device.type && PARSED_DEVICE[r.device.type]) || OS_DEVICE[os.toLowerCase()],
  };
}

/** From screen width when neither the device nor the OS says; unknown → desktop. */
function deviceFromScreen(width: number | undefined): DeviceType {
  if (!width) return 'desktop';
  if (width < 768) return 'mobile';
  if (width < 1024) return 'tablet';
  return 'desktop';
}

/**
 * ua-parser-js and isbot's regular expression are the hot spots of ingestion, and real traffic
 * repeats a few thousand user agents; results are cached by UA string (insertion-ordered
 * eviction at `maxEntries`).
 */
export function createUserAgentParser(maxEntries = 10_000) {
  const cache = new Map<string, Parsed>();
  return (ua: string, screenWidth?: number): UserAgentInfo => {
    let parsed = cache.get(ua);
    if (!parsed) {
      parsed = parse(ua);
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
      cache.set(ua, parsed);
    }
    return {
      browser: parsed.browser,
      browser_version: parsed.browserMajor,
      operating_system: parsed.os,
      operating_system_version: parsed.osVersion,
      device_type: parsed.device ?? deviceFromScreen(screenWidth),
      isBot: parsed.isBot,
    };
  };
}
