//go:build !mage

package fairrelay

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeSection is the README section that tells how to use the modules
// from another Go module.
const readmeSection = "## Using the modules from your own Go module"

// TestOutsideModule follows that section as a new user would: beside a
// clone (this repository, linked in), it makes the module example.com/myrelay
// with the README's commands and main.go, runs it with the README's `go run .`
// and compares what it prints with the output the README shows. Nothing may
// be downloaded (GOPROXY=off: the workspace's own dependencies are in the
// module cache), and the clone's go.mod, go.sum and go.work files must come
// out unchanged.
//
// Skipped with -short: on a cold build cache the program's first build
// compiles the SQLite driver (modernc.org/sqlite and modernc.org/libc),
// about three minutes on a busy 2-core machine; a second run takes seconds.
func TestOutsideModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an outside module with SQLite: minutes on a cold build cache")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	commands, mainGo, want := readmeSteps(t, string(readme))

	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	before := moduleFiles(t, repo)

	work := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(work, "fairrelay")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "myrelay")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainGo), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	var got string
	for _, line := range commands {
		args := strings.Fields(line)
		cmd := exec.CommandContext(ctx, "go", args[1:]...)
		cmd.Dir = dir
		cmd.Env = outsideEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
		}
		got = stdout.String()
	}
	if got != want {
		t.Errorf("go run . printed\n%s\nthe README shows\n%s", got, want)
	}
	// The README's output could be edited along with main.go into something
	// that proves nothing: the count is checked apart.
	if !strings.Contains(got, "\ndelivered 5 events\n") {
		t.Errorf("go run . printed\n%s\nwant a line %q", got, "delivered 5 events")
	}
	if after := moduleFiles(t, repo); !equalFiles(before, after) {
		t.Error("the outside module's commands changed a go.mod, go.sum or go.work file of the clone")
	}
}

// readmeSteps returns the commands of the README section's ```sh blocks
// (each a go command, the last `go run .`), its ```go block (main.go) and
// the output block that follows `go run .`.
func readmeSteps(t *testing.T, readme string) (commands []string, mainGo, output string) {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+readmeSection+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", readmeSection)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	afterRun := false
	for rest := section; ; {
		_, block, ok := strings.Cut(rest, "\n```")
		if !ok {
			break
		}
		lang, body, _ := strings.Cut(block, "\n")
		body, rest, ok = strings.Cut(body, "```\n")
		if !ok {
			t.Fatalf("README section %q has an unclosed code block", readmeSection)
		}
		switch {
		case lang == "sh":
			for _, line := range strings.Split(body, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if !strings.HasPrefix(line, "go ") || strings.ContainsAny(line, "#&|;$`'\"") {
					t.Fatalf("README command %q is not a plain go command; this test runs only those", line)
				}
				commands = append(commands, line)
				afterRun = line == "go run ."
			}
		case lang == "go":
			if mainGo != "" {
				t.Fatalf("README section %q has more than one go block", readmeSection)
			}
			mainGo = body
		case lang == "" && afterRun:
			output = body
			afterRun = false
		}
	}
	if len(commands) < 3 || commands[len(commands)-1] != "go run ." {
		t.Fatalf("README commands %q: want at least go mod init, go work init and, last, go run .", commands)
	}
	if !strings.HasPrefix(mainGo, "// ") || !strings.Contains(mainGo, "\npackage main\n") {
		t.Fatalf("README main.go does not look like a documented main package:\n%s", mainGo)
	}
	if output == "" {
		t.Fatal("README shows no output after go run .")
	}
	return commands, mainGo, output
}

// outsideEnv is this process's environment for the outside module's go
// commands: nothing downloaded, no toolchain switch, the workspace found
// from the module's folder (not a GOWORK of this repository) and no GOFLAGS
// that a workspace refuses (-mod=mod).
func outsideEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOWORK", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
}

// moduleFiles reads go.work, go.work.sum and every module's go.mod and
// go.sum in the repository at repo.
func moduleFiles(t *testing.T, repo string) map[string]string {
	t.Helper()
	files := map[string]string{}
	var paths []string
	for _, pattern := range []string{"go.*", "*/go.mod", "*/go.sum"} {
		m, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(b)
	}
	if len(files) < 10 {
		t.Fatalf("found %d go.mod, go.sum and go.work files in %s; is it the repository root?", len(files), repo)
	}
	return files
}

// equalFiles reports whether a and b hold the same files with the same
// contents.
func equalFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
