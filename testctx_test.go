package sftp

import (
	"context"
	"testing"
	"time"
)

// The one bound on waiting in this package's tests.
//
// Rule: every wait in a test (a client call's ctx, a channel receive, a process exit)
// is bounded by testTimeout. The bound is a hang detector, never a verdict: it is far
// beyond what any test needs even on a loaded two-core machine, so it decides no pass,
// it only turns a hang into a failure that names what hung instead of go test's global
// timeout. A test whose point is that something ends early (a deadline, a cancel) makes
// its own short ctx for that call; a test that really needs longer (treemillion_test.go)
// says so with testCtxFor.
//
// testTimeout bounds every wait in these tests (see the rule above).
const testTimeout = 2 * time.Minute

// testCtx is a context for a test's client calls: cancelled at the test's end, and
// expired after testTimeout so a hung call fails the test.
func testCtx(t testing.TB) context.Context { return testCtxFor(t, testTimeout) }

// testCtxFor is testCtx with another bound, for the few tests that need more.
func testCtxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
