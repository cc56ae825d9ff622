package sftp_test

import (
	"context"
	"expvar"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/sftptest"
)

// A service logs its Client's connection-level events with its own logger, and
// exports the Client's counters: here with expvar, whose handler serves them as JSON
// at /debug/vars; Stats is a plain struct, so any metrics library takes it as well.
func ExampleClient_Stats() {
	srv, err := sftptest.NewServer(sftptest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("remote", "files.example.com")
	c, err := srv.Client(ctx, sftp.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	expvar.Publish("sftp", expvar.Func(func() any { return c.Stats() }))

	before := c.Stats()
	for _, name := range []string{"/", "/missing"} {
		_, err := c.Stat(ctx, name)
		fmt.Println(name, err == nil)
	}
	after := c.Stats()
	fmt.Println("requests:", after.Requests-before.Requests, "replies:", after.Replies-before.Replies,
		"errors:", after.Errors-before.Errors)
	// Output:
	// / true
	// /missing false
	// requests: 2 replies: 2 errors: 1
}
