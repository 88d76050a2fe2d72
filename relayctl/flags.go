package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"

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
	c.Var(&c.e.clock.mode, "clock", "how the write reads time: `MODE` auto, logical or wall")
	c.Var(tickValue{&c.e.clock.skew}, "skew", "wall-clock mode's tolerance in `MS`")
	c.now.clock = &c.e.clock
	return c
}

// parse parses args, allowing flags before, between and after positional
// arguments ("redrive e1 --reason x"). It returns the positional arguments.
// Everything after "--" is positional.
func (c *cmdFlags) parse(args []string) ([]string, error) {
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
