package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServerBinaries reports that initdb, pg_ctl and postgres were not
// found (neither in `pg_config --bindir` nor under /usr/lib/postgresql).
var ErrNoServerBinaries = errors.New("pgtest: no PostgreSQL server binaries (initdb, pg_ctl)")

// Shutdown modes of Cluster.Restart, as pg_ctl names them: fast rolls back
// open transactions and closes every session, immediate stops the server
// without a shutdown checkpoint, as a crash would (WAL replay at start).
const (
	ShutdownFast      = "fast"
	ShutdownImmediate = "immediate"
)

// Cluster is a private PostgreSQL cluster: initdb'd into a directory of
// its own, listening on 127.0.0.1 on a free port, owned by whoever
// started it. Unlike the shared test server it may be stopped and
// restarted at will (a soak's server faults). Run as root, the server runs
// as the postgres OS user (PostgreSQL refuses root), through runuser.
type Cluster struct {
	Dir  string // the cluster's directory: data/, server.log, the socket
	Port int
	URL  string // postgres://postgres@127.0.0.1:Port/postgres?sslmode=disable

	bin    string // the directory of initdb, pg_ctl, postgres
	asUser string // "postgres" when run as root, else ""
}

// ServerBinaries returns the directory of initdb and pg_ctl: `pg_config
// --bindir` when it has them, else the newest /usr/lib/postgresql/*/bin;
// ErrNoServerBinaries when neither has them.
func ServerBinaries() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(m) > 0 {
		for i := len(m) - 1; i >= 0; i-- { // Glob sorts: the newest version last
			dirs = append(dirs, m[i])
		}
	}
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoServerBinaries
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// NewCluster initdb's a new cluster in a new directory under os.TempDir()
// and starts it on a free loopback port (trust authentication, superuser
// postgres). Stop stops it and removes the directory.
func NewCluster(ctx context.Context) (*Cluster, error) {
	bin, err := ServerBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		c.asUser = "postgres"
	}
	dir, err := os.MkdirTemp("", "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: cluster: %w", err)
	}
	c.Dir = dir
	if c.asUser != "" {
		u, err := user.Lookup(c.asUser)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: cluster: running as root needs the %s OS user: %w", c.asUser, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: cluster: %w", err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.Port = port
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := c.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

// run runs one of the server's binaries, as the postgres user when root.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.Dir
	return cmd.CombinedOutput()
}

// Start starts the (stopped) server and waits until it accepts
// connections.
func (c *Cluster) Start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=200", c.Port, c.Dir)
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.Dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// Stop stops the server in the given mode (ShutdownFast or
// ShutdownImmediate) and waits until it has stopped.
func (c *Cluster) Stop(ctx context.Context, mode string) error {
	if mode != ShutdownFast && mode != ShutdownImmediate {
		return fmt.Errorf("pgtest: shutdown mode %q: want fast or immediate", mode)
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// Restart stops the server in the given mode and starts it again: every
// session is ended (immediate: without a checkpoint, as a crash; the
// server replays its WAL at start).
func (c *Cluster) Restart(ctx context.Context, mode string) error {
	if err := c.Stop(ctx, mode); err != nil {
		return err
	}
	return c.Start(ctx)
}

// Close stops the server (immediate: nothing in it is kept) and removes
// its directory.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Stop(ctx, ShutdownImmediate)
	if rerr := os.RemoveAll(c.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("pgtest: cluster: %w", rerr)
	}
	return err
}

// Ping connects once and runs SELECT 1.
func (c *Cluster) Ping(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// StartCluster starts a private cluster (NewCluster) for t and closes it
// when t ends. Without the server binaries t is skipped with one line, or
// fails with FAIRRELAY_REQUIRE_POSTGRES=1.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := NewCluster(context.Background())
	if errors.Is(err, ErrNoServerBinaries) {
		msg := fmt.Sprintf("private PostgreSQL cluster skipped: %v; install the server (Debian: postgresql) and %s=1 to make this a failure", err, EnvRequire)
		Missing(t, msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// freePort picks a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
