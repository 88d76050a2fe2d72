// Package clock holds fairrelay's logical time.
//
// Time in fairrelay is a [Tick]: an integer handed in by a trusted caller (a test
// schedule, an operator, a relay loop). By default ticks are not seconds and
// not a wall clock; they only order events. Helpers come with it:
//
//   - [Manual], a schedule for tests and experiments that only moves forward;
//   - [Mark], the monotonic guard a store keeps: the highest tick it has
//     recorded, which refuses any later write whose tick is below it;
//   - [Source], what tells the current tick, and [Wall], the source for real
//     time: Unix milliseconds of the wall clock ([Millis], [Tick.Time]).
//
// In production, with real time, every writer of a store hands in ticks from
// [Wall] (milliseconds, never seconds or nanoseconds), read just before the
// write; a store opened with its real-time option tolerates the small
// regressions that several writers reading the clock cause (docs/contract.md
// §7.3).
//
// The package imports nothing outside the standard library.
package clock
