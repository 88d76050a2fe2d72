// Package clock holds fairrelay's logical time.
//
// Time in fairrelay is a [Tick]: an integer handed in by a trusted caller (a test
// schedule, an operator, a relay loop). Ticks are not seconds and not a wall
// clock; they only order events. Two helpers come with it:
//
//   - [Manual], a schedule for tests and experiments that only moves forward;
//   - [Mark], the monotonic guard a store keeps: the highest tick it has
//     recorded, which refuses any later write whose tick is below it.
//
// The package imports nothing outside the standard library.
package clock
