/**
 * What seeded traffic is drawn from: a product site's pages, the sources, places, clients and
 * languages of its visitors, each with a weight so that the mix is as skewed as real traffic
 * (a few values carry most of it, a long tail the rest).
 */

export type Weighted<T> = readonly (readonly [T, number])[];

/** A weighted choice: the same uniform draw always picks the same item. */
export function picker<T>(items: Weighted<T>): (u: number) => T {
  const values = items.map(([v]) => v);
  const bounds: number[] = [];
  let total = 0;
  for (const [, w] of items) {
    total += w;
    bounds.push(total);
  }
  return (u) => {
    const x = u * total;
    let lo = 0;
    let hi = bounds.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (bounds[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    return values[lo]!;
  };
}

export interface Page {
  path: string;
  title: string;
  host: string;
}

const BLOG = [
  ['self-hosted-analytics-guide', 'The complete guide to self-hosted analytics'],
  ['cookieless-tracking', 'Cookieless tracking, explained'],
  ['ga4-alternatives', '9 Google Analytics alternatives compared'],
  ['utm-parameters', 'How to use UTM parameters without losing your mind'],
  ['clickhouse-at-scale', 'Counting a billion events on one small server'],
  ['bounce-rate', 'What a good bounce rate really is'],
  ['launch-week', 'Launch week: everything we shipped'],
  ['privacy-by-default', 'Privacy by default is a product decision'],
  ['funnel-analysis', 'Funnel analysis for small teams'],
  ['release-2-0', 'Release 2.0: sessions, users and exports'],
  ['dashboards-that-load', 'Dashboards that load in 100 ms'],
  ['gdpr-checklist', 'A GDPR checklist for product analytics'],
] as const;
const DOCS = [
  ['getting-started/install', 'Install'],
  ['getting-started/first-site', 'Add your first site'],
  ['getting-started/script', 'The tracking script'],
  ['api/events', 'Events API'],
  ['api/overview', 'Overview API'],
  ['api/authentication', 'Authentication'],
  ['guides/goals', 'Goals'],
  ['guides/custom-events', 'Custom events'],
  ['guides/proxy', 'Serving the script from your domain'],
  ['self-hosting/docker', 'Docker'],
  ['self-hosting/upgrades', 'Upgrades'],
  ['self-hosting/backups', 'Backups'],
] as const;

const site = (path: string, title: string): Page => ({
  path,
  title: `${title} | Acme Analytics`,
  host: 'acme.example',
});

/** Pages by how often they are viewed (a Zipf-like tail). */
export const PAGES: Weighted<Page> = [
  [site('/', 'Simple, privacy-first analytics'), 260],
  [site('/pricing', 'Pricing'), 120],
  [site('/features', 'Features'), 70],
  [site('/blog', 'Blog'), 55],
  ...BLOG.map(([slug, title], i) => [site(`/blog/${slug}`, title), 60 / (i + 1)] as const),
  [{ path: '/docs', title: 'Documentation', host: 'docs.acme.example' }, 45],
  ...DOCS.map(
    ([slug, title], i) =>
      [{ path: `/docs/${slug}`, title: `${title} – Docs`, host: 'docs.acme.example' }, 40 / (i + 1)] as const,
  ),
  [site('/signup', 'Create your account'), 35],
  [site('/login', 'Log in'), 40],
  [site('/checkout/cart', 'Your plan'), 14],
  [site('/checkout/pay', 'Payment'), 9],
  [site('/checkout/done', 'Thank you'), 6],
  [site('/about', 'About us'), 12],
  [site('/contact', 'Contact'), 7],
  [site('/changelog', 'Changelog'), 10],
  [site('/integrations/wordpress', 'WordPress integration'), 6],
  [site('/integrations/nextjs', 'Next.js integration'), 5],
  [site('/integrations/shopify', 'Shopify integration'), 3],
  [site('/legal/privacy', 'Privacy policy'), 4],
  [site('/legal/terms', 'Terms of service'), 2],
];

export interface Source {
  referrer: string;
  channel: string;
  utm: [source: string, medium: string, campaign: string, term: string, content: string];
  /** Click id sent by an ad platform, carried in the landing page's query string. */
  clickId?: string;
  /** Where visitors from this source land first (paths of PAGES), or anywhere when absent. */
  lands?: readonly string[];
}

const none: Source['utm'] = ['', '', '', '', ''];
const blogPosts = BLOG.map(([slug]) => `/blog/${slug}`);
const docsPages = DOCS.map(([slug]) => `/docs/${slug}`);

/** Where sessions come from, with the channel ingest would classify them into. */
export const SOURCES: Weighted<Source> = [
  [{ referrer: '', channel: 'Direct', utm: none }, 330],
  [
    {
      referrer: 'https://www.google.com/',
      channel: 'Organic Search',
      utm: none,
      lands: [...blogPosts, ...docsPages, '/'],
    },
    250,
  ],
  [
    { referrer: 'https://www.bing.com/', channel: 'Organic Search', utm: none, lands: [...blogPosts, '/'] },
    28,
  ],
  [
    { referrer: 'https://duckduckgo.com/', channel: 'Organic Search', utm: none, lands: [...docsPages, '/'] },
    22,
  ],
  [
    {
      referrer: 'https://search.brave.com/',
      channel: 'Organic Search',
      utm: none,
      lands: ['/', ...blogPosts],
    },
    6,
  ],
  [
    {
      referrer: 'https://www.google.com/',
      channel: 'Paid Search',
      utm: ['google', 'cpc', 'brand_search', 'acme analytics', ''],
      clickId: 'gclid',
      lands: ['/', '/pricing'],
    },
    30,
  ],
  [
    {
      referrer: 'https://www.google.com/',
      channel: 'Paid Search',
      utm: ['google', 'cpc', 'competitor_search', 'google analytics alternative', ''],
      clickId: 'gclid',
      lands: ['/pricing', '/features'],
    },
    18,
  ],
  [{ referrer: 'https://t.co/', channel: 'Organic Social', utm: none, lands: blogPosts }, 22],
  [{ referrer: 'https://www.linkedin.com/', channel: 'Organic Social', utm: none, lands: blogPosts }, 18],
  [
    { referrer: 'https://www.reddit.com/', channel: 'Organic Social', utm: none, lands: [...blogPosts, '/'] },
    16,
  ],
  [
    {
      referrer: 'https://news.ycombinator.com/',
      channel: 'Organic Social',
      utm: none,
      lands: ['/', ...blogPosts],
    },
    14,
  ],
  [{ referrer: 'https://l.facebook.com/', channel: 'Organic Social', utm: none, lands: blogPosts }, 8],
  [
    {
      referrer: 'https://l.facebook.com/',
      channel: 'Paid Social',
      utm: ['facebook', 'paid_social', 'spring_retargeting', '', 'carousel'],
      clickId: 'fbclid',
      lands: ['/pricing'],
    },
    12,
  ],
  [
    { referrer: 'https://www.youtube.com/', channel: 'Organic Video', utm: none, lands: ['/', '/features'] },
    7,
  ],
  [
    {
      referrer: '',
      channel: 'Email',
      utm: ['newsletter', 'email', 'monthly_2026_03', '', 'header'],
      lands: blogPosts,
    },
    30,
  ],
  [
    {
      referrer: '',
      channel: 'Email',
      utm: ['newsletter', 'email', 'release_2_0', '', 'button'],
      lands: ['/changelog', '/'],
    },
    12,
  ],
  [
    {
      referrer: 'https://chatgpt.com/',
      channel: 'AI',
      utm: ['chatgpt.com', '', '', '', ''],
      lands: ['/', ...docsPages],
    },
    16,
  ],
  [{ referrer: 'https://www.perplexity.ai/', channel: 'AI', utm: none, lands: ['/', '/pricing'] }, 5],
  [
    { referrer: 'https://github.com/acme/analytics', channel: 'Referral', utm: none, lands: ['/', '/docs'] },
    20,
  ],
  [{ referrer: 'https://dev.to/', channel: 'Referral', utm: none, lands: blogPosts }, 8],
  [
    {
      referrer: 'https://www.producthunt.com/',
      channel: 'Referral',
      utm: ['producthunt', '', '', '', ''],
      lands: ['/'],
    },
    6,
  ],
  [{ referrer: 'https://alternativeto.net/', channel: 'Referral', utm: none, lands: ['/', '/features'] }, 5],
  [
    {
      referrer: 'https://partner-blog.example.org/',
      channel: 'Affiliate',
      utm: ['partner', 'affiliate', 'q1_partners', '', ''],
      lands: ['/pricing'],
    },
    4,
  ],
  [
    {
      referrer: 'https://ads.example.net/',
      channel: 'Display',
      utm: ['adnet', 'display', 'awareness_q1', '', 'banner_300x250'],
      lands: ['/'],
    },
    3,
  ],
];

export interface Place {
  country: string;
  region: string;
  city: string;
  lat: number;
  lon: number;
  languages: Weighted<string>;
}

const en = [['en-US', 1]] as const;
/** Countries with their regions and cities, by share of visitors. */
export const PLACES: Weighted<Place> = [
  [
    {
      country: 'US',
      region: 'California',
      city: 'San Francisco',
      lat: 37.77,
      lon: -122.42,
      languages: [
        ['en-US', 9],
        ['es-US', 1],
      ],
    },
    60,
  ],
  [
    {
      country: 'US',
      region: 'California',
      city: 'Los Angeles',
      lat: 34.05,
      lon: -118.24,
      languages: [
        ['en-US', 8],
        ['es-US', 2],
      ],
    },
    40,
  ],
  [{ country: 'US', region: 'New York', city: 'New York', lat: 40.71, lon: -74.01, languages: en }, 55],
  [{ country: 'US', region: 'Texas', city: 'Austin', lat: 30.27, lon: -97.74, languages: en }, 25],
  [{ country: 'US', region: 'Washington', city: 'Seattle', lat: 47.61, lon: -122.33, languages: en }, 22],
  [{ country: 'US', region: 'Illinois', city: 'Chicago', lat: 41.88, lon: -87.63, languages: en }, 18],
  [
    {
      country: 'GB',
      region: 'England',
      city: 'London',
      lat: 51.51,
      lon: -0.13,
      languages: [
        ['en-GB', 9],
        ['en-US', 1],
      ],
    },
    45,
  ],
  [
    {
      country: 'GB',
      region: 'England',
      city: 'Manchester',
      lat: 53.48,
      lon: -2.24,
      languages: [['en-GB', 1]],
    },
    10,
  ],
  [
    {
      country: 'GB',
      region: 'Scotland',
      city: 'Edinburgh',
      lat: 55.95,
      lon: -3.19,
      languages: [['en-GB', 1]],
    },
    6,
  ],
  [
    {
      country: 'DE',
      region: 'Berlin',
      city: 'Berlin',
      lat: 52.52,
      lon: 13.4,
      languages: [
        ['de-DE', 7],
        ['en-US', 3],
      ],
    },
    30,
  ],
  [
    {
      country: 'DE',
      region: 'Bavaria',
      city: 'Munich',
      lat: 48.14,
      lon: 11.58,
      languages: [
        ['de-DE', 8],
        ['en-US', 2],
      ],
    },
    18,
  ],
  [
    { country: 'DE', region: 'Hamburg', city: 'Hamburg', lat: 53.55, lon: 9.99, languages: [['de-DE', 1]] },
    10,
  ],
  [
    {
      country: 'FR',
      region: 'Île-de-France',
      city: 'Paris',
      lat: 48.86,
      lon: 2.35,
      languages: [
        ['fr-FR', 8],
        ['en-US', 2],
      ],
    },
    28,
  ],
  [
    {
      country: 'FR',
      region: 'Auvergne-Rhône-Alpes',
      city: 'Lyon',
      lat: 45.76,
      lon: 4.84,
      languages: [['fr-FR', 1]],
    },
    8,
  ],
  [
    {
      country: 'IN',
      region: 'Karnataka',
      city: 'Bengaluru',
      lat: 12.97,
      lon: 77.59,
      languages: [
        ['en-IN', 7],
        ['en-US', 3],
      ],
    },
    30,
  ],
  [
    {
      country: 'IN',
      region: 'Maharashtra',
      city: 'Mumbai',
      lat: 19.08,
      lon: 72.88,
      languages: [
        ['en-IN', 6],
        ['hi-IN', 1],
      ],
    },
    18,
  ],
  [
    {
      country: 'IN',
      region: 'Delhi',
      city: 'New Delhi',
      lat: 28.61,
      lon: 77.21,
      languages: [
        ['en-IN', 6],
        ['hi-IN', 2],
      ],
    },
    14,
  ],
  [
    { country: 'CA', region: 'Ontario', city: 'Toronto', lat: 43.65, lon: -79.38, languages: [['en-CA', 1]] },
    18,
  ],
  [
    {
      country: 'CA',
      region: 'Quebec',
      city: 'Montreal',
      lat: 45.5,
      lon: -73.57,
      languages: [
        ['fr-CA', 6],
        ['en-CA', 4],
      ],
    },
    8,
  ],
  [
    {
      country: 'NL',
      region: 'North Holland',
      city: 'Amsterdam',
      lat: 52.37,
      lon: 4.9,
      languages: [
        ['nl-NL', 5],
        ['en-US', 5],
      ],
    },
    14,
  ],
  [
    {
      country: 'BR',
      region: 'São Paulo',
      city: 'São Paulo',
      lat: -23.55,
      lon: -46.63,
      languages: [['pt-BR', 1]],
    },
    16,
  ],
  [
    {
      country: 'AU',
      region: 'New South Wales',
      city: 'Sydney',
      lat: -33.87,
      lon: 151.21,
      languages: [['en-AU', 1]],
    },
    12,
  ],
  [
    {
      country: 'AU',
      region: 'Victoria',
      city: 'Melbourne',
      lat: -37.81,
      lon: 144.96,
      languages: [['en-AU', 1]],
    },
    8,
  ],
  [{ country: 'ES', region: 'Madrid', city: 'Madrid', lat: 40.42, lon: -3.7, languages: [['es-ES', 1]] }, 10],
  [{ country: 'JP', region: 'Tokyo', city: 'Tokyo', lat: 35.68, lon: 139.69, languages: [['ja-JP', 1]] }, 10],
  [
    {
      country: 'PL',
      region: 'Mazovia',
      city: 'Warsaw',
      lat: 52.23,
      lon: 21.01,
      languages: [
        ['pl-PL', 7],
        ['en-US', 3],
      ],
    },
    8,
  ],
  [
    {
      country: 'SE',
      region: 'Stockholm',
      city: 'Stockholm',
      lat: 59.33,
      lon: 18.07,
      languages: [
        ['sv-SE', 5],
        ['en-US', 5],
      ],
    },
    6,
  ],
  [{ country: 'IT', region: 'Lombardy', city: 'Milan', lat: 45.46, lon: 9.19, languages: [['it-IT', 1]] }, 6],
  [{ country: 'SG', region: '', city: 'Singapore', lat: 1.35, lon: 103.82, languages: en }, 5],
  [{ country: 'NG', region: 'Lagos', city: 'Lagos', lat: 6.52, lon: 3.38, languages: [['en-NG', 1]] }, 4],
  // Addresses no database places (private networks, new ranges).
  [{ country: '', region: '', city: '', lat: 0, lon: 0, languages: en }, 8],
];

export interface Client {
  browser: string;
  versions: Weighted<string>;
  os: string;
  osVersions: Weighted<string>;
  device: string;
  screens: readonly (readonly [number, number])[];
}

const desktopScreens = [
  [1920, 1080],
  [1536, 864],
  [1440, 900],
  [2560, 1440],
  [1366, 768],
] as const;
const macScreens = [
  [1512, 982],
  [1440, 900],
  [1728, 1117],
  [2560, 1440],
] as const;
const phoneScreens = [
  [390, 844],
  [393, 852],
  [430, 932],
  [375, 667],
] as const;
const androidScreens = [
  [412, 915],
  [384, 854],
  [360, 800],
  [412, 892],
] as const;

/** Browsers on operating systems and devices, by share of visitors. */
export const CLIENTS: Weighted<Client> = [
  [
    {
      browser: 'Chrome',
      versions: [
        ['131', 6],
        ['130', 3],
        ['129', 1],
      ],
      os: 'Windows',
      osVersions: [
        ['10', 6],
        ['11', 4],
      ],
      device: 'desktop',
      screens: desktopScreens,
    },
    300,
  ],
  [
    {
      browser: 'Chrome',
      versions: [
        ['131', 6],
        ['130', 3],
        ['129', 1],
      ],
      os: 'macOS',
      osVersions: [['10.15.7', 1]],
      device: 'desktop',
      screens: macScreens,
    },
    110,
  ],
  [
    {
      browser: 'Safari',
      versions: [
        ['18', 6],
        ['17', 4],
      ],
      os: 'macOS',
      osVersions: [
        ['15.1', 5],
        ['14.6', 4],
        ['13.6', 1],
      ],
      device: 'desktop',
      screens: macScreens,
    },
    70,
  ],
  [
    {
      browser: 'Edge',
      versions: [
        ['131', 7],
        ['130', 3],
      ],
      os: 'Windows',
      osVersions: [
        ['10', 5],
        ['11', 5],
      ],
      device: 'desktop',
      screens: desktopScreens,
    },
    70,
  ],
  [
    {
      browser: 'Firefox',
      versions: [
        ['133', 5],
        ['132', 4],
        ['128', 1],
      ],
      os: 'Windows',
      osVersions: [
        ['10', 6],
        ['11', 4],
      ],
      device: 'desktop',
      screens: desktopScreens,
    },
    40,
  ],
  [
    {
      browser: 'Firefox',
      versions: [
        ['133', 6],
        ['132', 4],
      ],
      os: 'Linux',
      osVersions: [['', 1]],
      device: 'desktop',
      screens: desktopScreens,
    },
    15,
  ],
  [
    {
      browser: 'Chrome',
      versions: [['131', 1]],
      os: 'Linux',
      osVersions: [['', 1]],
      device: 'desktop',
      screens: desktopScreens,
    },
    15,
  ],
  [
    {
      browser: 'Chrome',
      versions: [['131', 1]],
      os: 'Chrome OS',
      osVersions: [['14541.0.0', 1]],
      device: 'desktop',
      screens: [[1366, 768]],
    },
    5,
  ],
  [
    {
      browser: 'Opera',
      versions: [['114', 1]],
      os: 'Windows',
      osVersions: [['10', 1]],
      device: 'desktop',
      screens: desktopScreens,
    },
    5,
  ],
  [
    {
      browser: 'Mobile Safari',
      versions: [
        ['18', 6],
        ['17', 4],
      ],
      os: 'iOS',
      osVersions: [
        ['18.1', 5],
        ['17.6', 4],
        ['16.7', 1],
      ],
      device: 'mobile',
      screens: phoneScreens,
    },
    180,
  ],
  [
    {
      browser: 'Chrome',
      versions: [
        ['131', 7],
        ['130', 3],
      ],
      os: 'Android',
      osVersions: [
        ['14', 5],
        ['13', 3],
        ['12', 2],
      ],
      device: 'mobile',
      screens: androidScreens,
    },
    140,
  ],
  [
    {
      browser: 'Samsung Internet',
      versions: [
        ['26', 6],
        ['25', 4],
      ],
      os: 'Android',
      osVersions: [
        ['14', 6],
        ['13', 4],
      ],
      device: 'mobile',
      screens: androidScreens,
    },
    30,
  ],
  [
    {
      browser: 'Chrome',
      versions: [['131', 1]],
      os: 'iOS',
      osVersions: [['18.1', 1]],
      device: 'mobile',
      screens: phoneScreens,
    },
    15,
  ],
  [
    {
      browser: 'Mobile Safari',
      versions: [['18', 1]],
      os: 'iOS',
      osVersions: [['18.1', 1]],
      device: 'tablet',
      screens: [
        [820, 1180],
        [1024, 1366],
      ],
    },
    25,
  ],
  [
    {
      browser: 'Chrome',
      versions: [['131', 1]],
      os: 'Android',
      osVersions: [['14', 1]],
      device: 'tablet',
      screens: [[800, 1280]],
    },
    8,
  ],
  [
    {
      browser: 'Samsung Internet',
      versions: [['26', 1]],
      os: 'Tizen',
      osVersions: [['8.0', 1]],
      device: 'tv',
      screens: [[1920, 1080]],
    },
    1,
  ],
];

export const CUSTOM_EVENTS = {
  signup: '/signup',
  add_to_cart: '/checkout/cart',
  purchase: '/checkout/pay',
} as const;
export const PLANS: Weighted<string> = [
  ['free', 6],
  ['pro', 3],
  ['team', 1],
];
export const OUTBOUND: Weighted<string> = [
  ['https://github.com/acme/analytics', 5],
  ['https://x.com/acme', 2],
  ['https://www.linkedin.com/company/acme', 1],
  ['https://status.acme.example/', 1],
];
export const ERRORS: Weighted<[name: string, message: string]> = [
  [['TypeError', "Cannot read properties of undefined (reading 'map')"], 5],
  [['NetworkError', 'Failed to fetch'], 3],
  [['ChunkLoadError', 'Loading chunk 482 failed.'], 2],
];
