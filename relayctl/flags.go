package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// cmdFlags is one command's flag set plus the flags most commands share.
type cmdFlags struct {
	*flag.FlagSet
	e    *env
	json bool
	now  tickFlag
}

// newFlags starts the flag set of command name. usage is the synopsis that
// follows "relayctl" in the help; about says in a sentence or two what the
// command does.
func newFlags(e *env, name, usage, about string) *cmdFlags {
	fs := flag.NewFlagSet("relayctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &cmdFlags{FlagSet: fs, e: e}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: relayctl %s\n\n%s\n\nFlags:\n", usage, about)
		fs.PrintDefaults()
	}
	return c
}

// withQueue accepts --queue after the command too.
func (c *cmdFlags) withQueue() *cmdFlags {
	c.StringVar(&c.e.queuePath, "queue", c.e.queuePath, "queue database `PATH`")
	return c
}

// withReceiver accepts --receiver after the command too.
func (c *cmdFlags) withReceiver(skippable bool) *cmdFlags {
	help := "receiver database `PATH`"
	if skippable {
		help += " (empty: leave the receiver out)"
	}
	c.StringVar(&c.e.receiverPath, "receiver", c.e.receiverPath, help)
	return c
}

// withJSON adds --json.
func (c *cmdFlags) withJSON() *cmdFlags {
	c.BoolVar(&c.json, "json", false, "print JSON for scripts instead of a table")
	return c
}

// withNow adds --now TICK, and accepts --clock and --skew after the command
// too.
func (c *cmdFlags) withNow() *cmdFlags {
	c.Var(&c.now, "now", "`TICK` of the write (default: the queue's clock mark, or this machine's clock in Unix ms in wall-clock mode)")
	c.withClock("how the write reads time")
	c.now.clock = &c.e.clock
	return c
}

// withClock accepts the global --clock and --skew after the command too;
// what says what the mode decides ("how the write reads time").
func (c *cmdFlags) withClock(what string) *cmdFlags {
	c.Var(&c.e.clock.mode, "clock", what+": `MODE` auto, logical or wall")
	c.withSkew()
	return c
}

// withSkew accepts the global --skew after the command too, as a Go
// duration (durationForm), into the environment's clock configuration.
func (c *cmdFlags) withSkew() *cmdFlags {
	c.Var(tickValue{&c.e.clock.skew}, "skew", "wall-clock mode's tolerance, a Go `DURATION` such as 1s or 500ms")
	return c
}

// globalFlags are the flags relayctl takes before the command name. A
// command accepts each of them after its name too (addGlobals), with the
// same meaning, unless it declares a flag of that name itself.
var globalFlags = []string{"queue", "receiver", "clock", "skew"}

// addGlobals declares each global flag the command has not declared, bound
// to the environment, so that `relayctl CMD --skew 1s` works like `relayctl
// --skew 1s CMD` on every command.
func (c *cmdFlags) addGlobals() {
	if c.e == nil {
		return
	}
	for _, name := range globalFlags {
		if c.Lookup(name) != nil {
			continue
		}
		switch name {
		case "queue":
			c.withQueue()
		case "receiver":
			c.withReceiver(false)
		case "clock":
			c.Var(&c.e.clock.mode, "clock", "how writes read time: `MODE` auto, logical or wall")
		case "skew":
			c.withSkew()
		}
	}
}

// Duration defines a flag holding a Go duration (durationValue: "30s",
// "250ms", "2m"; a refusal names the form). It shadows flag.FlagSet's
// Duration, whose error says only "parse error", so every command's
// duration flags read and fail the same way. A command's own --skew starts
// from the global --skew (given before the command name), so that both
// positions mean the same.
func (c *cmdFlags) Duration(name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	c.DurationVar(p, name, value, usage)
	return p
}

// DurationVar is Duration into p.
func (c *cmdFlags) DurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	if name == "skew" && c.e != nil && c.e.skewSet {
		*p = time.Duration(c.e.clock.skew) * time.Millisecond
	}
	c.Var(durationValue{p}, name, usage)
}

// durationForm is what every duration flag's refusal says it wants.
const durationForm = "want a Go duration such as 30s or 250ms"

// durationValue is a flag holding a Go duration. A bare number other than
// 0 is refused: it has no unit (docs/decisions/relayctl-durations.md).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return shortDuration(*v.d)
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// parseDuration reads a Go duration; the error names the expected form.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(durationForm)
	}
	return d, nil
}

// shortDuration writes d as a Go duration without zero tails: 2m, 1h,
// 1h30m, 1m30s, 250ms (time.Duration's String writes 2m0s, 1h0m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// parse parses args, allowing flags before, between and after positional
// arguments ("redrive e1 --reason x"). It returns the positional arguments.
// Everything after "--" is positional. Every command accepts the global
// flags too (addGlobals).
func (c *cmdFlags) parse(args []string) ([]string, error) {
	c.addGlobals()
	var pos []string
	for {
		if err := c.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlagParse
		}
		rest := c.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isSet reports whether the flag called name was given on the command line.
func (c *cmdFlags) isSet(name string) bool {
	set := false
	c.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// tickFlag is --now: a tick that remembers whether it was given, and the
// clock configuration of the command it belongs to.
type tickFlag struct {
	set   bool
	tick  clock.Tick
	clock *clockConfig
}

func (t *tickFlag) String() string {
	if t == nil || !t.set {
		return ""
	}
	return strconv.FormatInt(int64(t.tick), 10)
}

func (t *tickFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a tick (an integer): %q", s)
	}
	t.set, t.tick = true, clock.Tick(n)
	return nil
}
