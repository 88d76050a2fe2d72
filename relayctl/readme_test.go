package main

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/receiverstore"
)

// readmeStep is one ```sh block of README.md's "Operating a queue" section
// and the output block that follows it.
type readmeStep struct {
	commands []string
	output   string // "" when no output block follows
}

// readmeSteps reads the "Operating a queue" section of the README at path;
// ok is false when the file or the section does not exist.
func readmeSteps(t *testing.T, path string) (steps []readmeStep, ok bool) {
	t.Helper()
	return readmeSection(t, path, "Operating a queue")
}

// readmeSection reads the ```sh blocks of the README section titled title
// ("## title") and the output blocks that follow them.
func readmeSection(t *testing.T, path, title string) (steps []readmeStep, ok bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## "+title+"\n")
	if start < 0 {
		return nil, false
	}
	text = text[start+1:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var (
		fence string // "" outside a block, else its info string
		body  []string
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence, body = strings.TrimPrefix(line, "```"), nil
			if fence == "" {
				fence = "plain"
			}
		case fence != "" && line == "```":
			switch fence {
			case "sh":
				steps = append(steps, readmeStep{commands: body})
			case "plain":
				if len(steps) > 0 && steps[len(steps)-1].output == "" {
					steps[len(steps)-1].output = strings.Join(body, "\n") + "\n"
				}
			}
			fence = ""
		case fence != "":
			body = append(body, line)
		}
	}
	return steps, true
}

// shellWords splits a command line the way sh does for the simple lines of
// the README: words separated by spaces, double or single quotes grouping.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeOperatingSection runs the commands of the "Operating a queue"
// section of relayctl/README.md, and of the repository's README.md when it
// has that section too, in order, against a queue where evt-1007 has been
// quarantined the way the relay would (docs/contract.md §2.4: three failures with
// unsupported_delta and readmeErrorText). Each command must print exactly the output shown after
// it, and the section must really unblock the flow ("a newcomer ...
// finds why a flow is stuck and redrives it, copy-pasting the commands").
func TestReadmeOperatingSection(t *testing.T) {
	t.Parallel()
	steps, ok := readmeSteps(t, "README.md")
	if !ok {
		t.Fatal(`relayctl/README.md has no "## Operating a queue" section`)
	}
	t.Run("relayctl/README.md", func(t *testing.T) {
		t.Parallel()
		checkReadmeSteps(t, steps)
	})
	// The root README, when the section is copied there (not in a module
	// zip, where ../README.md does not exist).
	if root, ok := readmeSteps(t, filepath.Join("..", "README.md")); ok {
		t.Run("README.md", func(t *testing.T) {
			t.Parallel()
			checkReadmeSteps(t, root)
		})
	}
}

// readmeErrorText is the error text of evt-1007's failures in the README's
// example (what a receiver's refusal says).
const readmeErrorText = "HTTP 422: delta 500 is above the receiver's MaxDelta 100"

// checkReadmeSteps prepares the example queue and receiver, and runs steps.
func checkReadmeSteps(t *testing.T, steps []readmeStep) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	lines := `{"id": "evt-1001", "flow": "tenant-7", "body": {"delta": 5}}
{"id": "evt-1007", "flow": "tenant-42", "body": {"delta": 500}}
{"id": "evt-1008", "flow": "tenant-42", "body": {"delta": 2}}
{"id": "evt-1002", "flow": "tenant-7", "body": {"delta": 3}}
`
	if err := os.WriteFile(events, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, "enqueue", "--file", events)
	if last := quarantineWithError(t, filepath.Join(dir, "queue.db"), "evt-1007", 1, "unsupported_delta", readmeErrorText); last != 7 {
		t.Fatalf("quarantined at tick %d, want 7", last)
	}
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []receiverstore.Message{
		{ID: "evt-1001", Flow: "tenant-7", Seq: 1, Body: []byte(`{"delta": 5}`)},
		{ID: "evt-1002", Flow: "tenant-7", Seq: 2, Body: []byte(`{"delta": 3}`)},
	} {
		if out, err := r.Receive(context.Background(), m); err != nil || out != receiverstore.Accepted {
			t.Fatalf("Receive(%s) = %s, %v; want accepted", m.ID, out, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	if len(steps) < 5 {
		t.Fatalf("README section has %d command blocks, want at least 5", len(steps))
	}
	for _, st := range steps {
		var outs []string
		for _, line := range st.commands {
			words := shellWords(t, line)
			if len(words) == 0 || words[0] != "relayctl" {
				t.Fatalf("README command %q does not start with relayctl", line)
			}
			e := newEnv(strings.NewReader(""), nil, nil)
			var out, errb strings.Builder
			e.stdout, e.stderr, e.dir = &out, &errb, dir
			if code := e.main(words[1:]); code != exitOK {
				t.Fatalf("README command %q: exit status = %d, want 0; stderr:\n%s", line, code, errb.String())
			}
			outs = append(outs, out.String())
		}
		if st.output == "" {
			continue
		}
		if got := strings.Join(outs, "\n"); got != st.output {
			t.Errorf("README output after %q:\ngot:\n%s\nwant (README):\n%s", st.commands, got, st.output)
		}
	}

	// The flow is unblocked and the audit holds the redrive.
	if out := mustRun(t, dir, "quarantined"); out != "no quarantined events\n" {
		t.Fatalf("quarantined after the README = %q, want none", out)
	}
	var audit []auditRow
	decodeStrict(t, mustRun(t, dir, "audit", "--json"), &audit)
	if len(audit) != 1 || audit[0].EventID != "evt-1007" {
		t.Fatalf("audit after the README = %+v, want one redrive of evt-1007", audit)
	}
}
