//! Geospatial indexes: GEOADD, GEODIST, GEOHASH, GEOPOS, GEORADIUS,
//! GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and GEOSEARCHSTORE,
//! with Redis 7.0's replies, error texts and arithmetic (`geo.c`,
//! `geohash.c`, `geohash_helper.c`).
//!
//! A geo index is a plain sorted set: each member's score is the 52-bit
//! geohash of its position (longitude and latitude each cut into 2^26
//! steps, latitude bits in the even positions, longitude bits in the odd
//! ones, over latitudes ±85.05112878). The same coordinates give the same
//! score as in Redis, bit for bit, so a set written by either reads the same
//! in the other, and every sorted-set command works on it.
//!
//! A search finds the geohash cell (at a precision estimated from the radius)
//! that holds the centre and its eight neighbours, drops the neighbours that
//! the search area cannot reach, reads each remaining cell as one score range
//! of the set, and keeps the points whose haversine distance (on a sphere of
//! radius 6372797.560856 m) puts them inside the circle or box. The same
//! cells in the same order as Redis, so `COUNT n ANY` stops at the same
//! points.
//!
//! A search reads its set in one `read_collection` step. The STORE forms
//! then replace their destination: GEOSEARCHSTORE carries the ATOMIC flag,
//! and GEORADIUS / GEORADIUSBYMEMBER, whose destination is an option, enter
//! the store's exclusive section themselves when they are given STORE or
//! STOREDIST, so that the read and the write are one step for every worker.

use std::cmp::Ordering;

use store::{Handle, Scored, ZSet};

use super::zset::{self, parse_score, AddFlags};
use crate::command::{clip, flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, NOT_FLOAT, SYNTAX};
use crate::parse;

/// A unit that is not m, km, ft or mi.
const BAD_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
/// A radius that is not a number.
const NEED_RADIUS: &str = "ERR need numeric radius";
/// A box width that is not a number.
const NEED_WIDTH: &str = "ERR need numeric width";
/// A box height that is not a number.
const NEED_HEIGHT: &str = "ERR need numeric height";
/// A negative radius.
const NEGATIVE_RADIUS: &str = "ERR radius cannot be negative";
/// A negative box side.
const NEGATIVE_BOX: &str = "ERR height or width cannot be negative";
/// COUNT 0 or below.
const COUNT_POSITIVE: &str = "ERR COUNT must be > 0";
/// A search around a member the set does not hold.
const NO_MEMBER: &str = "ERR could not decode requested zset member";
/// ANY without COUNT.
const ANY_NEEDS_COUNT: &str = "ERR the ANY argument requires COUNT argument";

crate::command::group_cmd!("geo");

/// The geo commands. GEORADIUS and GEORADIUSBYMEMBER name their source key
/// and, after STORE or STOREDIST, a destination ([`radius_keys`]).
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("geoadd", -5, WRITE | DENYOOM, (1, 1, 1), "3.2.0", "Add one or more geospatial items in the geospatial index represented using a sorted set", geoadd),
    cmd("geodist", -4, READONLY, (1, 1, 1), "3.2.0", "Returns the distance between two members of a geospatial index", geodist),
    cmd("geohash", -2, READONLY, (1, 1, 1), "3.2.0", "Returns members of a geospatial index as standard geohash strings", geohash),
    cmd("geopos", -2, READONLY, (1, 1, 1), "3.2.0", "Returns longitude and latitude of members of a geospatial index", geopos),
    Command { movable_keys: Some(radius_keys), ..cmd("georadius", -6, WRITE | DENYOOM, (1, 1, 1), "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", georadius) },
    cmd("georadius_ro", -6, READONLY, (1, 1, 1), "3.2.10", "A read-only variant for GEORADIUS", georadius_ro),
    Command { movable_keys: Some(radius_keys), ..cmd("georadiusbymember", -5, WRITE | DENYOOM, (1, 1, 1), "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", georadiusbymember) },
    cmd("georadiusbymember_ro", -5, READONLY, (1, 1, 1), "3.2.10", "A read-only variant for GEORADIUSBYMEMBER", georadiusbymember_ro),
    cmd("geosearch", -7, READONLY, (1, 1, 1), "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", geosearch),
    cmd("geosearchstore", -8, WRITE | DENYOOM | ATOMIC, (1, 2, 1), "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", geosearchstore),
];

/// GEORADIUS's and GEORADIUSBYMEMBER's keys: the source, and the argument
/// after the last STORE or STOREDIST (the one the command writes).
fn radius_keys(args: &[Arg<'_>]) -> Vec<usize> {
    let mut keys = vec![1];
    let store = (5..args.len().saturating_sub(1)).rev().find(|&i| {
        args[i].eq_ignore_ascii_case(b"store") || args[i].eq_ignore_ascii_case(b"storedist")
    });
    keys.extend(store.map(|i| i + 1));
    keys
}

// ---------- geohash ----------

/// The longitudes and latitudes a geohash can hold (EPSG:900913): the
/// latitude limit is where the Web Mercator projection is square.
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate in a score: 26, so 52 bits in all, which a double
/// holds exactly.
const STEP_MAX: u8 = 26;
/// The sphere distances are measured on (the Earth's quadratic mean radius).
const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Earth's circumference in Web Mercator metres: the radius past
/// which a single cell covers everything.
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians.
const DEG_TO_RAD: f64 = std::f64::consts::PI / 180.0;

/// A closed interval of one coordinate.
#[derive(Clone, Copy, Debug)]
struct Interval {
    min: f64,
    max: f64,
}

/// The intervals scores encode: (longitude, latitude).
const GEO_RANGES: (Interval, Interval) = (
    Interval {
        min: LON_MIN,
        max: LON_MAX,
    },
    Interval {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// The intervals of the standard geohash that GEOHASH prints.
const STANDARD_RANGES: (Interval, Interval) = (
    Interval {
        min: -180.0,
        max: 180.0,
    },
    Interval {
        min: -90.0,
        max: 90.0,
    },
);

/// A geohash cell: `step` bits of each coordinate, interleaved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    bits: u64,
    step: u8,
}

impl Cell {
    /// No cell: a neighbour the search leaves out.
    const NONE: Cell = Cell { bits: 0, step: 0 };

    fn is_none(self) -> bool {
        self == Cell::NONE
    }

    /// The scores of the points inside the cell: `min..max`, max excluded.
    fn score_range(self) -> (f64, f64) {
        let shift = 52 - 2 * u32::from(self.step.min(STEP_MAX));
        let min = self.bits << shift;
        let max = (self.bits + 1) << shift;
        (min as f64, max as f64)
    }
}

/// A cell's rectangle in degrees.
#[derive(Clone, Copy, Debug)]
struct Area {
    lon: Interval,
    lat: Interval,
}

/// Spreads the 32 bits of `v` over the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & 0x5555_5555_5555_5555
}

/// The inverse of [`spread`]: the even bits of `v`, packed.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | x >> 4) & 0x00FF_00FF_00FF_00FF;
    x = (x | x >> 8) & 0x0000_FFFF_0000_FFFF;
    x = (x | x >> 16) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// The cell of `step` bits per coordinate holding (lon, lat) over `ranges`;
/// None outside them or outside what a geohash can hold.
fn encode(ranges: (Interval, Interval), lon: f64, lat: f64, step: u8) -> Option<Cell> {
    let (lon_range, lat_range) = ranges;
    if step == 0 || step > 32 {
        return None;
    }
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * cells;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * cells;
    // Truncation toward zero, as C converts a double to an integer.
    let bits = spread(lat_offset as u32) | spread(lon_offset as u32) << 1;
    Some(Cell { bits, step })
}

/// The rectangle of `cell` over `ranges`; None for [`Cell::NONE`].
fn decode(ranges: (Interval, Interval), cell: Cell) -> Option<Area> {
    if cell.is_none() {
        return None;
    }
    let (lon_range, lat_range) = ranges;
    let lat_index = squash(cell.bits);
    let lon_index = squash(cell.bits >> 1);
    let cells = (1u64 << cell.step.min(63)) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let edge = |range: Interval, scale: f64, i: u32| range.min + (f64::from(i) / cells) * scale;
    Some(Area {
        lat: Interval {
            min: edge(lat_range, lat_scale, lat_index),
            max: edge(lat_range, lat_scale, lat_index.wrapping_add(1)),
        },
        lon: Interval {
            min: edge(lon_range, lon_scale, lon_index),
            max: edge(lon_range, lon_scale, lon_index.wrapping_add(1)),
        },
    })
}

/// The centre of `area`, kept within what a geohash can hold.
fn center(area: &Area) -> (f64, f64) {
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The score of a position (valid coordinates).
fn score_of(lon: f64, lat: f64) -> f64 {
    let cell = encode(GEO_RANGES, lon, lat, STEP_MAX).unwrap_or(Cell::NONE);
    (cell.bits << (52 - 2 * u32::from(STEP_MAX))) as f64
}

/// The 52 bits of a score, converted as C converts a double to an unsigned
/// 64-bit integer on x86-64 (a score that was never a geohash still decodes
/// to some position, as in Redis).
fn score_bits(score: f64) -> u64 {
    if score < 0.0 {
        score as i64 as u64
    } else if score < 18_446_744_073_709_551_616.0 {
        score as u64
    } else {
        0
    }
}

/// The position (lon, lat) a score stands for: its cell's centre.
fn position(score: f64) -> (f64, f64) {
    let cell = Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    decode(GEO_RANGES, cell).map_or((0.0, 0.0), |area| center(&area))
}

/// Mask of the longitude (odd) bits.
const LON_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
/// Mask of the latitude (even) bits.
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

/// The cell `d` (±1) steps east (`lon`) or north (not `lon`) of `cell`,
/// wrapping around at the edges.
fn shift(cell: Cell, d: i8, lon: bool) -> Cell {
    let (moving, fixed) = if lon {
        (LON_BITS, LAT_BITS)
    } else {
        (LAT_BITS, LON_BITS)
    };
    let unused = 64 - 2 * u32::from(cell.step.min(32));
    // Every bit of the other coordinate set: adding one carries across them.
    let filler = fixed.checked_shr(unused).unwrap_or(0);
    let mut v = cell.bits & moving;
    if d > 0 {
        v = v.wrapping_add(filler + 1);
    } else {
        v = (v | filler).wrapping_sub(filler + 1);
    }
    v &= moving.checked_shr(unused).unwrap_or(0);
    Cell {
        bits: v | (cell.bits & fixed),
        step: cell.step,
    }
}

/// Where each neighbour is in [`neighbours`]' answer.
const NORTH: usize = 0;
const SOUTH: usize = 1;
const EAST: usize = 2;
const WEST: usize = 3;
const NORTH_EAST: usize = 4;
const NORTH_WEST: usize = 5;
const SOUTH_EAST: usize = 6;
const SOUTH_WEST: usize = 7;

/// The eight neighbours of a cell (N, S, E, W, NE, NW, SE, SW).
fn neighbours(cell: Cell) -> [Cell; 8] {
    let go = |dx: i8, dy: i8| {
        let mut c = cell;
        if dx != 0 {
            c = shift(c, dx, true);
        }
        if dy != 0 {
            c = shift(c, dy, false);
        }
        c
    };
    [
        go(0, 1),
        go(0, -1),
        go(1, 0),
        go(-1, 0),
        go(1, 1),
        go(-1, 1),
        go(1, -1),
        go(-1, -1),
    ]
}

/// How many bits per coordinate the search cells of a radius (in metres)
/// around latitude `lat` get: the finest cells still wide enough, a step
/// coarser near the poles.
fn estimate_step(radius_m: f64, lat: f64) -> u8 {
    if radius_m == 0.0 {
        return STEP_MAX;
    }
    let mut range = radius_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// The great-circle distance in metres along a meridian.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (lat2 * DEG_TO_RAD - lat1 * DEG_TO_RAD).abs()
}

/// The haversine distance in metres between two positions in degrees.
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = lon1 * DEG_TO_RAD;
    let lon2r = lon2 * DEG_TO_RAD;
    let v = ((lon2r - lon1r) / 2.0).sin();
    // Same longitude: no trigonometry needed.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = lat1 * DEG_TO_RAD;
    let lat2r = lat2 * DEG_TO_RAD;
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

// ---------- search areas ----------

/// What a search covers around its centre, in the query's unit.
#[derive(Clone, Copy, Debug)]
enum Extent {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// A search area: a centre in degrees, an extent, and metres per unit.
#[derive(Clone, Copy, Debug)]
struct Shape {
    lon: f64,
    lat: f64,
    extent: Extent,
    to_meters: f64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            lon: 0.0,
            lat: 0.0,
            extent: Extent::Radius(0.0),
            to_meters: 0.0,
        }
    }
}

impl Shape {
    /// The area's bounding box: (min lon, min lat, max lon, max lat). A
    /// box's sides bend with the meridians, so it is widest at its edge
    /// nearest the equator.
    fn bounds(&self) -> (f64, f64, f64, f64) {
        let (half_width, half_height) = match self.extent {
            Extent::Radius(r) => (r, r),
            Extent::Box { width, height } => (width / 2.0, height / 2.0),
        };
        let height = self.to_meters * half_height;
        let width = self.to_meters * half_width;
        let lat_delta = height / EARTH_RADIUS_M / DEG_TO_RAD;
        let lon_delta = |lat: f64| width / EARTH_RADIUS_M / (lat * DEG_TO_RAD).cos() / DEG_TO_RAD;
        let lon_delta = if self.lat < 0.0 {
            lon_delta(self.lat - lat_delta)
        } else {
            lon_delta(self.lat + lat_delta)
        };
        (
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        )
    }

    /// How far the area reaches from its centre, in metres (to a box's
    /// corner).
    fn reach_m(&self) -> f64 {
        let r = match self.extent {
            Extent::Radius(r) => r,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        r * self.to_meters
    }

    /// The distance in metres from the centre to the point a score stands
    /// for, when the point is inside the area; and the point.
    fn contains(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (lon, lat) = position(score);
        let dist = match self.extent {
            Extent::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                if d > r * self.to_meters {
                    return None;
                }
                d
            }
            Extent::Box { width, height } => {
                // Inside when no farther than half the height north or
                // south, and half the width east or west along the point's
                // own parallel.
                let (width_m, height_m) = (width * self.to_meters, height * self.to_meters);
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                distance(self.lon, self.lat, lon, lat)
            }
        };
        Some((lon, lat, dist))
    }

    /// The cells to read, in Redis's order: the centre's, then N, S, E, W,
    /// NE, NW, SE, SW, with [`Cell::NONE`] for the neighbours the area
    /// cannot reach.
    fn cells(&self) -> [Cell; 9] {
        let (min_lon, min_lat, max_lon, max_lat) = self.bounds();
        let cover = |step: u8| {
            let cell =
                encode(GEO_RANGES, self.lon, self.lat, step).unwrap_or(Cell { bits: 0, step });
            let area = decode(GEO_RANGES, cell);
            (cell, neighbours(cell), area)
        };
        let mut step = estimate_step(self.reach_m(), self.lat);
        let (mut cell, mut around, mut area) = cover(step);
        // The estimate can leave a neighbour too narrow to reach the edge of
        // the area: one step coarser then.
        let side = |i: usize| decode(GEO_RANGES, around[i]);
        let (north, south, east, west) = (side(NORTH), side(SOUTH), side(EAST), side(WEST));
        let too_narrow = north.is_some_and(|a| a.lat.max < max_lat)
            || south.is_some_and(|a| a.lat.min > min_lat)
            || east.is_some_and(|a| a.lon.max < max_lon)
            || west.is_some_and(|a| a.lon.min > min_lon);
        if step > 1 && too_narrow {
            step -= 1;
            (cell, around, area) = cover(step);
        }
        // Neighbours on a side the area does not cross are not read.
        if let (true, Some(area)) = (step >= 2, area) {
            let mut drop = |sides: [usize; 3]| sides.map(|i| around[i] = Cell::NONE);
            if area.lat.min < min_lat {
                drop([SOUTH, SOUTH_WEST, SOUTH_EAST]);
            }
            if area.lat.max > max_lat {
                drop([NORTH, NORTH_EAST, NORTH_WEST]);
            }
            if area.lon.min < min_lon {
                drop([WEST, SOUTH_WEST, NORTH_WEST]);
            }
            if area.lon.max > max_lon {
                drop([EAST, SOUTH_EAST, NORTH_EAST]);
            }
        }
        let [n, s, e, w, ne, nw, se, sw] = around;
        [cell, n, s, e, w, ne, nw, se, sw]
    }
}

/// A point a search found.
#[derive(Debug)]
struct Found {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    /// From the centre, in metres.
    dist: f64,
}

/// Members read per step when scanning a cell's score range.
const PAGE: u64 = 256;

/// Adds the points of `cell` that are inside `shape` to `found`, stopping
/// once it holds `limit` (0: no limit).
fn points_in_cell(
    z: &ZSet,
    cell: Cell,
    shape: &Shape,
    found: &mut Vec<Found>,
    limit: u64,
) -> store::Result<()> {
    let (min, max) = cell.score_range();
    let mut rank = z.count_below_score(min, false)?;
    let end = z.count_below_score(max, false)?;
    while rank < end {
        let page = z.range(rank, end.min(rank + PAGE))?;
        if page.is_empty() {
            break;
        }
        rank += page.len() as u64;
        for (member, score) in page {
            if let Some((lon, lat, dist)) = shape.contains(score) {
                found.push(Found {
                    member,
                    score,
                    lon,
                    lat,
                    dist,
                });
            }
            if limit > 0 && found.len() as u64 >= limit {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Every point of the set inside `shape` (the first `limit`, when not 0),
/// cell by cell.
fn points_in_shape(z: &ZSet, shape: &Shape, limit: u64) -> store::Result<Vec<Found>> {
    let cells = shape.cells();
    let mut found = Vec::new();
    // Very large areas can make neighbours equal: a cell the same as the
    // one read just before is read once (the centre's cell excepted, as in
    // Redis).
    let mut last = 0;
    for (i, &cell) in cells.iter().enumerate() {
        if cell.is_none() || (last != 0 && cell == cells[last]) {
            continue;
        }
        if limit > 0 && found.len() as u64 >= limit {
            break;
        }
        points_in_cell(z, cell, shape, &mut found, limit)?;
        last = i;
    }
    Ok(found)
}

// ---------- arguments ----------

/// Metres per unit, for a unit argument.
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    match () {
        _ if parse::is(arg, "m") => Ok(1.0),
        _ if parse::is(arg, "km") => Ok(1000.0),
        _ if parse::is(arg, "ft") => Ok(0.3048),
        _ if parse::is(arg, "mi") => Ok(1609.34),
        _ => Err(CmdError::msg(BAD_UNIT)),
    }
}

/// A longitude and latitude argument pair, within the limits a geohash
/// holds.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = parse_score(lon).ok_or(CmdError::msg(NOT_FLOAT))?;
    let lat = parse_score(lat).ok_or(CmdError::msg(NOT_FLOAT))?;
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(CmdError::owned(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// `radius unit`: the radius and metres per unit.
fn radius(num: &[u8], unit_arg: &[u8]) -> Result<(Extent, f64), CmdError> {
    let r = parse_score(num).ok_or(CmdError::msg(NEED_RADIUS))?;
    if r < 0.0 {
        return Err(CmdError::msg(NEGATIVE_RADIUS));
    }
    Ok((Extent::Radius(r), unit(unit_arg)?))
}

/// `width height unit`: the box and metres per unit.
fn box_extent(width: &[u8], height: &[u8], unit_arg: &[u8]) -> Result<(Extent, f64), CmdError> {
    let width = parse_score(width).ok_or(CmdError::msg(NEED_WIDTH))?;
    let height = parse_score(height).ok_or(CmdError::msg(NEED_HEIGHT))?;
    if height < 0.0 || width < 0.0 {
        return Err(CmdError::msg(NEGATIVE_BOX));
    }
    Ok((Extent::Box { width, height }, unit(unit_arg)?))
}

/// The position of `member` in `z`, or Redis's error when it is missing.
fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    let score = z.score(member)?.ok_or(CmdError::msg(NO_MEMBER))?;
    Ok(position(score))
}

/// Which search command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Radius,
    RadiusRo,
    ByMember,
    ByMemberRo,
    Search,
    SearchStore,
}

impl Kind {
    /// Where the options start.
    fn options_at(self) -> usize {
        match self {
            Kind::Radius | Kind::RadiusRo => 6,
            Kind::ByMember | Kind::ByMemberRo => 5,
            Kind::Search => 2,
            Kind::SearchStore => 3,
        }
    }

    /// The source key's position.
    fn key_at(self) -> usize {
        if self == Kind::SearchStore {
            2
        } else {
            1
        }
    }

    /// GEOSEARCH or GEOSEARCHSTORE (FROM… and BY… options).
    fn is_search(self) -> bool {
        matches!(self, Kind::Search | Kind::SearchStore)
    }

    /// Whether `STORE key` and `STOREDIST key` are options.
    fn takes_store_key(self) -> bool {
        matches!(self, Kind::Radius | Kind::ByMember)
    }
}

/// The result order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Unsorted,
    Asc,
    Desc,
}

/// A parsed search.
#[derive(Debug)]
struct Query<'a> {
    shape: Shape,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    any: bool,
    /// 0: all.
    count: u64,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

/// Reads a search's arguments in Redis's order, so that the first problem
/// is the one reported. `z` is the source set; when the key is missing,
/// members are not looked up (and GEORADIUSBYMEMBER's radius is not even
/// read), as in Redis.
fn parse_query<'a>(
    kind: Kind,
    args: &'a [Arg<'_>],
    z: Option<&ZSet>,
) -> Result<Query<'a>, CmdError> {
    let mut q = Query {
        shape: Shape::default(),
        with_dist: false,
        with_hash: false,
        with_coord: false,
        order: Order::Unsorted,
        any: false,
        count: 0,
        store: None,
        store_dist: false,
    };
    match kind {
        Kind::Radius | Kind::RadiusRo => {
            (q.shape.lon, q.shape.lat) = lon_lat(&args[2], &args[3])?;
            (q.shape.extent, q.shape.to_meters) = radius(&args[4], &args[5])?;
        }
        Kind::ByMember | Kind::ByMemberRo => {
            if let Some(z) = z {
                (q.shape.lon, q.shape.lat) = member_position(z, &args[2])?;
                (q.shape.extent, q.shape.to_meters) = radius(&args[3], &args[4])?;
            }
        }
        Kind::Search => {}
        Kind::SearchStore => q.store = Some(&args[1]),
    }
    let search = kind.is_search();
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let opts = &args[kind.options_at()..];
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        // How many arguments follow this one.
        let left = opts.len() - i - 1;
        if parse::is(a, "withdist") {
            q.with_dist = true;
        } else if parse::is(a, "withhash") {
            q.with_hash = true;
        } else if parse::is(a, "withcoord") {
            q.with_coord = true;
        } else if parse::is(a, "any") {
            q.any = true;
        } else if parse::is(a, "asc") {
            q.order = Order::Asc;
        } else if parse::is(a, "desc") {
            q.order = Order::Desc;
        } else if parse::is(a, "count") && left >= 1 {
            let n = parse::int(&opts[i + 1])?;
            if n <= 0 {
                return Err(CmdError::msg(COUNT_POSITIVE));
            }
            q.count = n as u64;
            i += 1;
        } else if (parse::is(a, "store") || parse::is(a, "storedist"))
            && left >= 1
            && kind.takes_store_key()
        {
            q.store = Some(&opts[i + 1]);
            q.store_dist = parse::is(a, "storedist");
            i += 1;
        } else if parse::is(a, "storedist") && kind == Kind::SearchStore {
            q.store_dist = true;
        } else if parse::is(a, "frommember") && left >= 1 && search && !from_lonlat {
            if let Some(z) = z {
                (q.shape.lon, q.shape.lat) = member_position(z, &opts[i + 1])?;
            }
            from_member = true;
            i += 1;
        } else if parse::is(a, "fromlonlat") && left >= 2 && search && !from_member {
            (q.shape.lon, q.shape.lat) = lon_lat(&opts[i + 1], &opts[i + 2])?;
            from_lonlat = true;
            i += 2;
        } else if parse::is(a, "byradius") && left >= 2 && search && !by_box {
            (q.shape.extent, q.shape.to_meters) = radius(&opts[i + 1], &opts[i + 2])?;
            by_radius = true;
            i += 2;
        } else if parse::is(a, "bybox") && left >= 3 && search && !by_radius {
            (q.shape.extent, q.shape.to_meters) =
                box_extent(&opts[i + 1], &opts[i + 2], &opts[i + 3])?;
            by_box = true;
            i += 3;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let what = if kind == Kind::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::owned(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if search && !(from_member || from_lonlat) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            clip(&args[0], 128)
        )));
    }
    if search && !(by_radius || by_box) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
            clip(&args[0], 128)
        )));
    }
    if q.any && q.count == 0 {
        return Err(CmdError::msg(ANY_NEEDS_COUNT));
    }
    // COUNT alone means the nearest ones: sorted.
    if q.count > 0 && q.order == Order::Unsorted && !q.any {
        q.order = Order::Asc;
    }
    Ok(q)
}

// ---------- ordering ----------

/// Orders points by distance as Redis does, ties included. All of them:
/// a stable sort (glibc's `qsort` is a merge sort). Only the first `count`
/// of more: Redis's partial quicksort, whose order of equal distances
/// shoal reproduces by making the same comparisons and swaps. Then keeps
/// the first `count` (0: all).
fn sort_found(found: &mut Vec<Found>, order: Order, count: u64) {
    let asc = |a: &Found, b: &Found| {
        if a.dist > b.dist {
            Ordering::Greater
        } else if a.dist == b.dist {
            Ordering::Equal
        } else {
            Ordering::Less
        }
    };
    let desc = |a: &Found, b: &Found| asc(a, b).reverse();
    let keep = match usize::try_from(count) {
        Ok(n) if n > 0 && n < found.len() => n,
        _ => found.len(),
    };
    match (order, keep == found.len()) {
        (Order::Unsorted, _) => {}
        (Order::Asc, true) => found.sort_by(asc),
        (Order::Desc, true) => found.sort_by(desc),
        (Order::Asc, false) => partial_quicksort(found, 0, keep - 1, &asc),
        (Order::Desc, false) => partial_quicksort(found, 0, keep - 1, &desc),
    }
    found.truncate(keep);
}

/// Bentley and McIlroy's quicksort ("Engineering a Sort Function") that
/// skips the parts lying wholly outside ranks `first..=last`, which end up
/// sorted: Redis's `pqsort`.
fn partial_quicksort<T>(v: &mut [T], first: usize, last: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    quicksort_part(v, 0, first, last, cmp);
}

/// One part of [`partial_quicksort`]: `v` starts at rank `offset`.
fn quicksort_part<T>(
    mut v: &mut [T],
    mut offset: usize,
    first: usize,
    last: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    // Whether the ranks `lo..hi` hold any of `first..=last`.
    let wanted = |lo: usize, hi: usize| !(last < lo || first >= hi);
    loop {
        let n = v.len();
        if n < 7 {
            // Insertion sort.
            for m in 1..n {
                let mut l = m;
                while l > 0 && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        // The pivot: a median of three, or of three medians of three.
        let mut m = n / 2;
        if n > 7 {
            let (mut l, mut h) = (0, n - 1);
            if n > 40 {
                let d = n / 8;
                l = median_of_three(v, l, l + d, l + 2 * d, cmp);
                m = median_of_three(v, m - d, m, m + d, cmp);
                h = median_of_three(v, h - 2 * d, h - d, h, cmp);
            }
            m = median_of_three(v, l, m, h, cmp);
        }
        v.swap(0, m);
        // Split into: equal (pa..) | less | greater | equal (..pd), with
        // the pivot at 0.
        let (mut pa, mut pb) = (1, 1);
        let (mut pc, mut pd) = (n - 1, n - 1);
        loop {
            while pb <= pc {
                match cmp(&v[pb], &v[0]) {
                    Ordering::Greater => break,
                    Ordering::Equal => {
                        v.swap(pa, pb);
                        pa += 1;
                    }
                    Ordering::Less => {}
                }
                pb += 1;
            }
            while pb <= pc {
                match cmp(&v[pc], &v[0]) {
                    Ordering::Less => break,
                    Ordering::Equal => {
                        v.swap(pc, pd);
                        pd -= 1;
                    }
                    Ordering::Greater => {}
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        // Move the equal runs to the middle.
        let r = pa.min(pb - pa);
        swap_runs(v, 0, pb - r, r);
        let r = (pd - pc).min(n - pd - 1);
        swap_runs(v, pb, n - r, r);
        let less = pb - pa;
        if less > 1 && wanted(offset, offset + less) {
            quicksort_part(&mut v[..less], offset, first, last, cmp);
        }
        let greater = pd - pc;
        if greater <= 1 || !wanted(offset + n - greater, offset + n) {
            return;
        }
        let rest = std::mem::take(&mut v);
        v = &mut rest[n - greater..];
        offset += n - greater;
    }
}

/// The index of the median of `v[a]`, `v[b]` and `v[c]`.
fn median_of_three<T>(
    v: &[T],
    a: usize,
    b: usize,
    c: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) -> usize {
    let lt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

/// Swaps `v[i..i + n]` with `v[j..j + n]`, element by element.
fn swap_runs<T>(v: &mut [T], i: usize, j: usize, n: usize) {
    for k in 0..n {
        v.swap(i + k, j + k);
    }
}

// ---------- replies ----------

/// A distance as Redis prints one: rounded to 4 decimals (ties to even),
/// always with all four.
fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_owned();
    }
    let scaled = (d * 10000.0).round_ties_even();
    // Out of range, C's llrint gives i64::MIN.
    let n = if scaled.is_finite() && scaled.abs() < 9.223_372_036_854_776e18 {
        scaled as i64
    } else {
        i64::MIN
    };
    let digits = format!("{:05}", n.unsigned_abs());
    let (int, frac) = digits.split_at(digits.len() - 4);
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{int}.{frac}")
}

/// A coordinate as Redis prints one (`%.17Lf` without trailing zeros).
fn format_coord(x: f64) -> String {
    let mut s = format!("{x:.17}");
    if s.contains('.') {
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
    }
    if s == "-0" {
        s = "0".to_owned();
    }
    s
}

/// A position: `[lon, lat]`, doubles in RESP3, bulk strings in RESP2.
fn reply_position(cx: &mut Cx<'_>, lon: f64, lat: f64) {
    cx.out.array_len(2);
    cx.out.double(format_coord(lon).as_bytes());
    cx.out.double(format_coord(lat).as_bytes());
}

/// A search's points: members alone, or `[member, dist?, hash?, coord?]`.
fn reply_found(cx: &mut Cx<'_>, found: &[Found], q: &Query<'_>) {
    let extras = usize::from(q.with_dist) + usize::from(q.with_hash) + usize::from(q.with_coord);
    cx.out.array_len(found.len());
    for f in found {
        if extras > 0 {
            cx.out.array_len(extras + 1);
        }
        cx.out.bulk(&f.member);
        if q.with_dist {
            cx.out
                .bulk(format_distance(f.dist / q.shape.to_meters).as_bytes());
        }
        if q.with_hash {
            cx.out.integer(f.score as i64);
        }
        if q.with_coord {
            reply_position(cx, f.lon, f.lat);
        }
    }
}

// ---------- commands ----------

fn geoadd(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while let Some(a) = args.get(i) {
        match () {
            _ if parse::is(a, "nx") => f.nx = true,
            _ if parse::is(a, "xx") => f.xx = true,
            _ if parse::is(a, "ch") => f.ch = true,
            _ => break,
        }
        i += 1;
    }
    let triples = &args[i..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) || (f.nx && f.xx) {
        return Err(CmdError::msg(SYNTAX));
    }
    let mut pairs = Vec::with_capacity(triples.len() / 3);
    for t in triples.chunks_exact(3) {
        let (lon, lat) = lon_lat(&t[0], &t[1])?;
        pairs.push((score_of(lon, lat), &*t[2]));
    }
    zset::add(cx, &args[1], &pairs, f)
}

fn geodist(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(CmdError::msg(SYNTAX)),
    };
    let db = cx.db();
    let scores = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
        Ok((z.score(&args[2])?, z.score(&args[3])?))
    })?;
    match cx.miss_if_none(&args[1], scores) {
        Some((Some(a), Some(b))) => {
            let (lon1, lat1) = position(a);
            let (lon2, lat2) = position(b);
            let d = distance(lon1, lat1, lon2, lat2) / to_meters;
            cx.out.bulk(format_distance(d).as_bytes());
        }
        _ => cx.out.null(),
    }
    Ok(())
}

/// The scores of `members` in the set at `key` (None for a missing key).
fn scores(cx: &mut Cx<'_>, key: &[u8], members: &[Arg<'_>]) -> Result<Vec<Option<f64>>, CmdError> {
    let db = cx.db();
    let scores = cx
        .h()
        .read_collection::<ZSet, _>(db, key, |z| members.iter().map(|m| z.score(m)).collect())?;
    let scores = cx.miss_if_none(key, scores);
    Ok(scores.unwrap_or_else(|| vec![None; members.len()]))
}

fn geohash(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let scores = scores(cx, &args[1], &args[2..])?;
    cx.out.array_len(scores.len());
    for score in scores {
        let Some(score) = score else {
            cx.out.null();
            continue;
        };
        // Scores use latitudes ±85.05°; a standard geohash uses ±90°.
        let (lon, lat) = position(score);
        let bits = encode(STANDARD_RANGES, lon, lat, STEP_MAX).map_or(0, |c| c.bits);
        let mut text = [b'0'; 11];
        // Ten characters of 5 bits hold 50 of the 52; the eleventh is '0'.
        for (i, ch) in text.iter_mut().take(10).enumerate() {
            let index = (bits >> (52 - (i + 1) * 5)) & 0x1f;
            *ch = ALPHABET[index as usize];
        }
        cx.out.bulk(&text);
    }
    Ok(())
}

fn geopos(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let scores = scores(cx, &args[1], &args[2..])?;
    cx.out.array_len(scores.len());
    for score in scores {
        match score {
            Some(score) => {
                let (lon, lat) = position(score);
                reply_position(cx, lon, lat);
            }
            None => cx.out.null_array(),
        }
    }
    Ok(())
}

/// Every search command: in the store's exclusive section when it may
/// write a destination.
fn search(cx: &mut Cx<'_>, args: &[Arg<'_>], kind: Kind) -> CmdResult {
    let may_store = kind.takes_store_key()
        && args[kind.options_at()..]
            .iter()
            .any(|a| parse::is(a, "store") || parse::is(a, "storedist"));
    if may_store {
        Handle::exclusive_in(cx, Cx::h, |cx| search_now(cx, args, kind))
    } else {
        search_now(cx, args, kind)
    }
}

fn search_now(cx: &mut Cx<'_>, args: &[Arg<'_>], kind: Kind) -> CmdResult {
    let key = &args[kind.key_at()];
    let db = cx.db();
    let read = cx.h().read_collection::<ZSet, _>(db, key, |z| {
        let q = match parse_query(kind, args, Some(z)) {
            Ok(q) => q,
            Err(e) => return Ok(Err(e)),
        };
        let limit = if q.any { q.count } else { 0 };
        let found = points_in_shape(z, &q.shape, limit)?;
        Ok(Ok((q, found)))
    })?;
    let (q, mut found) = match cx.miss_if_none(key, read) {
        Some(read) => read?,
        // Still parsed: a missing key does not hide a bad argument.
        None => (parse_query(kind, args, None)?, Vec::new()),
    };
    sort_found(&mut found, q.order, q.count);
    let Some(dst) = q.store else {
        reply_found(cx, &found, &q);
        return Ok(());
    };
    let items: Vec<Scored> = found
        .into_iter()
        .map(|f| {
            let score = if q.store_dist {
                f.dist / q.shape.to_meters
            } else {
                f.score
            };
            (f.member, score)
        })
        .collect();
    let event = if kind.is_search() {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    zset::store_result(cx, dst, items, event)
}

fn georadius(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::Radius)
}

fn georadius_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::RadiusRo)
}

fn georadiusbymember(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::ByMember)
}

fn georadiusbymember_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::ByMemberRo)
}

fn geosearch(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::Search)
}

fn geosearchstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    search(cx, args, Kind::SearchStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_squash_are_inverse() {
        for v in [0u32, 1, 2, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(spread(v) & !LAT_BITS, 0);
        }
        assert_eq!(spread(0b11), 0b101);
    }

    #[test]
    fn scores_match_redis() {
        // GEOADD nyc -73.9454966 40.747533 on redis-server 7.0.
        assert_eq!(score_of(-73.9454966, 40.747533), 1791875804419201.0);
        assert_eq!(score_of(13.361389, 38.115556), 3479099956230698.0);
        let (lon, lat) = position(3479099956230698.0);
        assert_eq!(format_coord(lon), "13.36138933897018433");
        assert_eq!(format_coord(lat), "38.11555639549629859");
    }

    #[test]
    fn neighbours_wrap_around() {
        let cell = encode(GEO_RANGES, 179.9, 0.0, 3).unwrap();
        let east = neighbours(cell)[2];
        let area = decode(GEO_RANGES, east).unwrap();
        assert_eq!(area.lon.min, -180.0);
    }

    #[test]
    fn distances_print_four_decimals() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.775_04), "0.7750");
        assert_eq!(format_distance(166274.15156960033), "166274.1516");
        assert_eq!(format_distance(0.00004), "0.0000");
    }

    #[test]
    fn coordinates_drop_trailing_zeros() {
        assert_eq!(format_coord(10.0), "10");
        assert_eq!(format_coord(-0.0), "0");
        assert_eq!(format_coord(0.5), "0.5");
    }

    #[test]
    fn partial_quicksort_sorts_the_wanted_ranks() {
        // A fixed pseudo-random sequence with many repeats.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [0usize, 1, 6, 7, 8, 40, 41, 300] {
            let v: Vec<u32> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 23) as u32
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort();
            for keep in 1..len.min(50) {
                let mut got = v.clone();
                partial_quicksort(&mut got, 0, keep - 1, &|a: &u32, b: &u32| a.cmp(b));
                assert_eq!(got[..keep], sorted[..keep], "len {len} keep {keep}");
                let mut all = got.clone();
                all.sort();
                assert_eq!(all, sorted);
            }
        }
    }

    #[test]
    fn step_estimates() {
        assert_eq!(estimate_step(0.0, 0.0), 26);
        assert_eq!(estimate_step(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_step(3000.0, 40.0), 12);
        assert_eq!(estimate_step(3000.0, 70.0), 11);
        assert_eq!(estimate_step(3000.0, -85.0), 10);
    }
}
