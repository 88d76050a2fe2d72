//go:build !mage

package fairrelay_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The build constraint keeps this file out of the mage build, in which the
// root folder's package is the magefile's main (go vet -tags mage).
//
// This file is the one home of the import rules between the workspace's
// modules (docs/architecture.md, "Import rules", points here). The test
// reads the imports of every non-test Go file of every module that go.work
// uses, in every build variant (build constraints are not evaluated), and
// fails for each import of one of our modules that a rule forbids.
//
// Test files (*_test.go) are exempt: a test may import a helper (pgtest), a
// store as a reference or a relay to drive the code end to end, and none
// of that is linked into a user's build. A module's go.mod therefore may
// still require a module its code must not import.

// ourPrefix is the module path prefix of the workspace's modules; a module's
// path is ourPrefix + its folder.
const ourPrefix = "github.com/fairrelay/fairrelay/"

// rule constrains which of our modules the modules in from may import:
// only the modules in only (when only is not nil), and never those in not.
// A module may always import its own packages.
type rule struct {
	name string
	from []string
	only []string
	not  []string
}

// The sides and layers the rules name.
var (
	leaves    = []string{"clock", "fairness", "crashpoint", "writerlock", "drivertx", "migration"}
	stores    = []string{"queuestore", "receiverstore", "pgqueuestore", "pgreceiverstore"}
	aboveAll  = []string{"relay", "inbox", "console", "relayctl", "experiment", "soak", "bench", "conformance", "shard"}
	receiving = []string{"inbox", "receiverstore", "pgreceiverstore", "receiver"}
	sending   = []string{"relay", "queue", "queuestore", "pgqueuestore"}
)

// Rule names, as failures and pending allowances cite them.
const (
	ruleLeaves   = "clock, fairness, crashpoint, writerlock, drivertx and migration import no module of ours"
	ruleQueue    = "queue imports only clock"
	ruleReceiver = "receiver imports nothing of ours but clock"
	ruleStores   = "the stores never import each other, crashpoint, or anything above them (relay, inbox, console, relayctl, experiment, soak, bench, conformance, shard)"
	ruleSides    = "the receiving side (inbox, receiverstore, pgreceiverstore, receiver) never imports the sending side (relay, queue, queuestore, pgqueuestore)"
	ruleConsole  = "console imports no store: it takes the interfaces of queue and receiver"
	ruleWebhook  = "webhook, the wire protocol, imports nothing of ours"
	ruleShard    = "shard composes queue.Stores: it imports only queue, clock and fairness, never a store"
)

// rules are the import rules.
var rules = []rule{
	{name: ruleLeaves, from: leaves, only: []string{}},
	{name: ruleQueue, from: []string{"queue"}, only: []string{"clock"}},
	{name: ruleReceiver, from: []string{"receiver"}, only: []string{"clock"}},
	{name: ruleStores, from: stores, not: slices.Concat(stores, []string{"crashpoint"}, aboveAll)},
	{name: ruleSides, from: receiving, not: sending},
	{name: ruleConsole, from: []string{"console"}, not: stores},
	{name: ruleWebhook, from: []string{"webhook"}, only: []string{}},
	{name: ruleShard, from: []string{"shard"}, only: []string{"queue", "clock", "fairness"}},
}

// allowance lets a known break of a rule pass while the change that removes
// it is under way: an import of module imports by module from (by its file
// file only, when file is set, a path relative to the repository root).
type allowance struct {
	rule, from, file, imports string
	why                       string
}

// pending lists the known breaks of a rule that are being removed. Each
// entry is temporary: the test fails when an entry no longer matches any
// import, so whoever removes the import removes the entry with it.
var pending = []allowance{}

// importUse is one import of one of our modules by a non-test file.
type importUse struct {
	from, file, imports string // module folders; file relative to the root
	line                int
}

// TestImportRules fails for every import between our modules that breaks
// a rule and is not pending, and for every pending allowance that no
// longer matches an import.
func TestImportRules(t *testing.T) {
	mods := workspaceModules(t)
	for _, r := range rules {
		for _, m := range slices.Concat(r.from, r.only, r.not) {
			if !slices.Contains(mods, m) {
				t.Errorf("rule %q names %s, which go.work does not use: update the rule", r.name, m)
			}
		}
	}
	uses := ourImports(t, mods)
	used := make([]bool, len(pending))
	for _, u := range uses {
		for _, r := range rules {
			if !breaks(r, u) {
				continue
			}
			if i := pendingFor(r, u); i >= 0 {
				used[i] = true
				t.Logf("pending: %s:%d imports %s%s, against the rule %q (%s)", u.file, u.line, ourPrefix, u.imports, r.name, pending[i].why)
				continue
			}
			t.Errorf("%s:%d imports %s%s, which breaks the rule %q", u.file, u.line, ourPrefix, u.imports, r.name)
		}
	}
	for i, a := range pending {
		if !used[i] {
			who := a.from
			if a.file != "" {
				who = a.file
			}
			t.Errorf("the pending allowance of %s importing %s (rule %q) matches no import any more: remove it from pending", who, a.imports, a.rule)
		}
	}
}

// breaks reports whether u breaks r.
func breaks(r rule, u importUse) bool {
	if !slices.Contains(r.from, u.from) || u.imports == u.from {
		return false
	}
	if r.only != nil && !slices.Contains(r.only, u.imports) {
		return true
	}
	return slices.Contains(r.not, u.imports)
}

// pendingFor returns the index of the pending allowance of u under r, or -1.
func pendingFor(r rule, u importUse) int {
	for i, a := range pending {
		if a.rule == r.name && a.from == u.from && a.imports == u.imports && (a.file == "" || a.file == u.file) {
			return i
		}
	}
	return -1
}

// TestImportRulesCatchABreak checks the checker on made-up imports, so that
// a rule that could never fire does not pass unnoticed.
func TestImportRulesCatchABreak(t *testing.T) {
	for _, c := range []struct {
		u    importUse
		rule string
	}{
		{importUse{from: "inbox", imports: "relay"}, ruleSides},
		{importUse{from: "receiver", imports: "queue"}, ruleReceiver},
		{importUse{from: "queue", imports: "fairness"}, ruleQueue},
		{importUse{from: "queuestore", imports: "receiverstore"}, ruleStores},
		{importUse{from: "pgreceiverstore", imports: "crashpoint"}, ruleStores},
		{importUse{from: "console", imports: "pgqueuestore"}, ruleConsole},
		{importUse{from: "webhook", imports: "clock"}, ruleWebhook},
		{importUse{from: "drivertx", imports: "writerlock"}, ruleLeaves},
	} {
		broken := false
		for _, r := range rules {
			if r.name == c.rule && breaks(r, c.u) {
				broken = true
			}
		}
		if !broken {
			t.Errorf("%s importing %s does not break the rule %q", c.u.from, c.u.imports, c.rule)
		}
	}
	for _, u := range []importUse{
		{from: "queue", imports: "clock"},
		{from: "receiver", imports: "clock"},
		{from: "relay", imports: "webhook"},
		{from: "inbox", imports: "webhook"},
		{from: "queuestore", imports: "queue"},
		{from: "console", imports: "console"},
	} {
		for _, r := range rules {
			if breaks(r, u) {
				t.Errorf("%s importing %s breaks the rule %q; it is allowed", u.from, u.imports, r.name)
			}
		}
	}
}

// workspaceModules returns the folders go.work uses, but the root.
func workspaceModules(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("go.work")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mods []string
	inUse := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case inUse && fields[0] == ")":
			inUse = false
			continue
		case !inUse && fields[0] == "use" && len(fields) == 2 && fields[1] == "(":
			inUse = true
			continue
		case !inUse && fields[0] == "use" && len(fields) == 2:
			fields = fields[1:]
		case !inUse:
			continue
		}
		dir := filepath.Clean(fields[0])
		if dir == "." {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			t.Fatalf("go.work uses %s: %v", dir, err)
		}
		mods = append(mods, filepath.ToSlash(dir))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(mods) < 10 {
		t.Fatalf("go.work: found only the modules %v", mods)
	}
	return mods
}

// ourImports returns the imports of our modules by the non-test Go files
// of mods, skipping what the go tool skips (testdata, and folders whose
// name starts with . or _) and nested modules.
func ourImports(t *testing.T, mods []string) []importUse {
	t.Helper()
	fset := token.NewFileSet()
	var uses []importUse
	files := 0
	for _, mod := range mods {
		err := filepath.WalkDir(mod, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p == mod {
					return nil
				}
				if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, is := range f.Imports {
				path, err := strconv.Unquote(is.Path.Value)
				if err != nil {
					return fmt.Errorf("%s: %v", p, err)
				}
				if to := moduleOf(path, mods); to != "" {
					uses = append(uses, importUse{from: mod, file: filepath.ToSlash(p), imports: to, line: fset.Position(is.Pos()).Line})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files == 0 {
		t.Fatal("no Go file found in the workspace's modules")
	}
	return uses
}

// moduleOf returns the folder of the module of ours that holds the package
// path, or "" for a package not of ours.
func moduleOf(path string, mods []string) string {
	rest, ok := strings.CutPrefix(path, ourPrefix)
	if !ok {
		return ""
	}
	best := ""
	for _, m := range mods {
		if (rest == m || strings.HasPrefix(rest, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return rest // a module go.work does not use: no rule allows it
	}
	return best
}
