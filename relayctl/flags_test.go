package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestDurationFlags: every duration flag reads Go durations and names the
// form it wants; a command's own --skew starts from the global one, so that
// both positions mean the same (docs/decisions/relayctl-durations.md).
func TestDurationFlags(t *testing.T) {
	t.Parallel()
	newCmd := func(global ...string) (*env, *cmdFlags, *time.Duration) {
		e := newEnv(strings.NewReader(""), io.Discard, io.Discard)
		top := flag.NewFlagSet("relayctl", flag.ContinueOnError)
		top.SetOutput(io.Discard)
		top.Var(tickValue{&e.clock.skew}, "skew", "")
		if err := top.Parse(global); err != nil {
			t.Fatal(err)
		}
		top.Visit(func(f *flag.Flag) { e.skewSet = e.skewSet || f.Name == "skew" })
		c := newFlags(e, "relay", "relay", "")
		c.SetOutput(io.Discard)
		return e, c, c.Duration("skew", time.Second, "")
	}
	for _, tc := range []struct {
		global, args []string
		want         time.Duration
	}{
		{nil, nil, time.Second},
		{[]string{"--skew", "2s"}, nil, 2 * time.Second},
		{nil, []string{"--skew", "2s"}, 2 * time.Second},
		{[]string{"--skew", "3s"}, []string{"--skew", "250ms"}, 250 * time.Millisecond},
	} {
		_, c, skew := newCmd(tc.global...)
		if _, err := c.parse(tc.args); err != nil {
			t.Fatalf("global %v, args %v: %v", tc.global, tc.args, err)
		}
		if *skew != tc.want {
			t.Errorf("global %v, args %v: --skew = %v, want %v", tc.global, tc.args, *skew, tc.want)
		}
	}

	var d time.Duration
	v := durationValue{&d}
	for _, s := range []string{"100", "soon", "1x", ""} {
		if err := v.Set(s); err == nil || err.Error() != durationForm {
			t.Errorf("Set(%q) = %v, want %q", s, err, durationForm)
		}
	}
	if err := v.Set("0"); err != nil || d != 0 {
		t.Errorf("Set(0) = %v, d = %v; want 0", err, d)
	}
	if err := v.Set("1h30m"); err != nil || d != 90*time.Minute {
		t.Errorf("Set(1h30m) = %v, d = %v", err, d)
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                "0s",
		250 * time.Millisecond:           "250ms",
		2 * time.Minute:                  "2m",
		4 * time.Hour:                    "4h",
		90 * time.Minute:                 "1h30m",
		90 * time.Second:                 "1m30s",
		time.Hour + time.Second:          "1h0m1s",
		1500 * time.Millisecond:          "1.5s",
		time.Minute + time.Millisecond/2: "1m0.0005s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestSpanArg: a policy span's form says its unit; the other form is a
// usage error naming the flag and the form wanted.
func TestSpanArg(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		wall    bool
		want    int64
		wantErr string
	}{
		{"5", false, 5, ""},
		{"0", false, 0, ""},
		{"0", true, 0, ""},
		{"30s", true, 30_000, ""},
		{"4h", true, 14_400_000, ""},
		{"30s", false, 0, "--lease 30s: want a tick count such as 5; the queue runs in logical time"},
		{"100", true, 0, "--lease 100: want a Go duration such as 30s or 250ms; the queue runs in real time"},
		{"1500us", true, 0, "--lease 1500us: want whole milliseconds"},
	} {
		a, err := parseSpan(tc.in)
		if err != nil {
			t.Fatalf("parseSpan(%q): %v", tc.in, err)
		}
		got, err := a.ticksFor("lease", tc.wall)
		var ue *usageError
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%q wall=%v: %d, %v; want %d", tc.in, tc.wall, got, err, tc.want)
		case tc.wantErr != "" && (!errors.As(err, &ue) || !strings.HasPrefix(ue.msg, tc.wantErr)):
			t.Errorf("%q wall=%v: error %v, want a usage error starting %q", tc.in, tc.wall, err, tc.wantErr)
		}
	}
	if _, err := parseSpan("soon"); err == nil || err.Error() != spanForm {
		t.Errorf("parseSpan(soon) = %v, want %q", err, spanForm)
	}
}

// TestGlobalFlagsBothPositions: every command takes the global flags after
// its name as before it, with the same refusal of a value without a unit.
func TestGlobalFlagsBothPositions(t *testing.T) {
	t.Parallel()
	want := `invalid value "1000" for flag -skew: ` + durationForm
	for _, c := range commands {
		name := []string{c.name}
		switch c.name {
		case "receiver":
			name = append(name, "totals")
		case "policy":
			name = append(name, "set")
		}
		for _, args := range [][]string{
			append(append([]string{}, name...), "--skew", "1000"),
			append([]string{"--skew", "1000"}, name...),
		} {
			var out, errb strings.Builder
			if code := run(args, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), want) {
				t.Errorf("relayctl %s: exit %d, stderr %q; want %d and %q", strings.Join(args, " "), code, firstLine(errb.String()), exitUsage, want)
			}
		}
		for _, args := range [][]string{
			append(append([]string{}, name...), "--skew", "2s", "--clock", "wall", "--queue", "q.db", "--receiver", "r.db", "-h"),
			append([]string{"--skew", "2s", "--clock", "wall", "--queue", "q.db", "--receiver", "r.db"}, append(name, "-h")...),
		} {
			var out, errb strings.Builder
			if code := run(args, strings.NewReader(""), &out, &errb); code != exitOK {
				t.Errorf("relayctl %s: exit %d, stderr %q; want 0 (help)", strings.Join(args, " "), code, firstLine(errb.String()))
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
