package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/pmezard/go-difflib/difflib"
)

// Marshal is the one stable marshalling of a result, shared by the golden
// files, the check command and the output file: objects one key a line, one
// line per check, per trace entry and per snapshot row, and a final newline.
// It holds nothing that differs between two runs.
func Marshal(r Result) ([]byte, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", r.Name, err)
	}
	n, err := parseNode(data)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	n.write(&b, 0)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// Environment is where a run happened: it goes into the output file, never
// into a golden file.
type Environment struct {
	Go     string `json:"go"`
	SQLite string `json:"sqlite"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	// Backend and PostgreSQL are set for a run on PostgreSQL only: the
	// backend's name and the server's version.
	Backend    string `json:"backend,omitempty"`
	PostgreSQL string `json:"postgresql,omitempty"`
}

// CurrentEnvironment reports this process's Go version, SQLite version,
// operating system and architecture.
func CurrentEnvironment(ctx context.Context) (Environment, error) {
	v, err := SQLiteVersion(ctx)
	if err != nil {
		return Environment{}, err
	}
	return Environment{Go: runtime.Version(), SQLite: v, OS: runtime.GOOS, Arch: runtime.GOARCH}, nil
}

// EnvironmentOn is [CurrentEnvironment] for a run on backend b: on
// PostgreSQL it adds the backend's name and the server's version.
func EnvironmentOn(ctx context.Context, b Backend) (Environment, error) {
	env, err := CurrentEnvironment(ctx)
	if err != nil {
		return env, err
	}
	if pg, ok := b.(postgresBackend); ok {
		env.Backend = b.Name()
		if env.PostgreSQL, err = pg.version(ctx); err != nil {
			return env, err
		}
	}
	return env, nil
}

// Output lays out the output file: {"environment": …, "scenarios": […]},
// each scenario exactly as [Marshal] writes it, so that two runs give
// byte-identical "scenarios".
func Output(env Environment, results []Result) ([]byte, error) {
	e, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("{\n  \"environment\": ")
	b.Write(e)
	b.WriteString(",\n  \"scenarios\": [")
	for i, r := range results {
		data, err := Marshal(r)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		b.Write(bytes.ReplaceAll(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"), []byte("\n    ")))
	}
	if len(results) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	return b.Bytes(), nil
}

// Diff returns a unified diff from want (the golden file) to got, or "" when
// they are byte-identical.
func Diff(name string, want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(string(want)),
		B:        difflib.SplitLines(string(got)),
		FromFile: "testdata/" + name + GoldenSuffix + " (golden)",
		ToFile:   name + " (this run)",
		Context:  2,
	})
	if err != nil || d == "" {
		return fmt.Sprintf("%s differs from its golden file (the bytes differ, e.g. line endings)\n", name)
	}
	return d
}

// GoldenSuffix ends every golden file's name: testdata/<scenario>.golden.json.
const GoldenSuffix = ".golden.json"
