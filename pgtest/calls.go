package pgtest

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// CallCounter is a pgx query tracer (pgx.ConnConfig.Tracer) that counts
// the calls of one server function a pool makes, and those that ended
// without an error: how a test sees which path a PostgreSQL store's
// one-call statement took, since a call that falls back ends with the
// function's error (docs/decisions/postgres-server-side-transitions.md).
type CallCounter struct {
	call         string // what a call's SQL holds: the schema's dot, the name, "("
	calls, taken atomic.Int64
}

// NewCallCounter counts the calls of the function named fn, in any schema.
func NewCallCounter(fn string) *CallCounter { return &CallCounter{call: "." + fn + "("} }

// Calls is the number of calls made so far.
func (c *CallCounter) Calls() int64 { return c.calls.Load() }

// Taken is the number of calls that ended without an error.
func (c *CallCounter) Taken() int64 { return c.taken.Load() }

// Reset sets both counts back to 0.
func (c *CallCounter) Reset() {
	c.calls.Store(0)
	c.taken.Store(0)
}

type callKey struct{}

// TraceQueryStart counts a statement that calls the function. A statement
// that defines or changes it (a migration's CREATE, CREATE OR REPLACE,
// ALTER or DROP FUNCTION) names it after the keyword FUNCTION, which no
// call holds, and is not counted.
func (c *CallCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, c.call) && !strings.Contains(d.SQL, "FUNCTION") {
		c.calls.Add(1)
		return context.WithValue(ctx, callKey{}, c)
	}
	return ctx
}

// TraceQueryEnd counts a counted call that ended without an error.
func (c *CallCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(callKey{}) == c && d.Err == nil {
		c.taken.Add(1)
	}
}
