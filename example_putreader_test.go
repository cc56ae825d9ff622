package sftp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
)

// An upload from a stream (an HTTP request's body, say) replaces the remote file whole
// or not at all: the data goes to a part file, renamed over report.csv only once the
// stream has ended and every byte is on the server. A stream that fails part way
// leaves report.csv as it was.
func ExampleClient_PutReader() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	body := strings.NewReader("id,total\n1,42\n")
	n, err := c.PutReader(ctx, body, "report.csv")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "bytes")

	broken := io.MultiReader(strings.NewReader("id,total\n"), errReader{errors.New("client went away")})
	_, err = c.PutReader(ctx, broken, "report.csv")
	fmt.Println(err != nil)

	got, err := c.ReadFile(ctx, "report.csv")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(got))
	// Output:
	// 14 bytes
	// true
	// id,total
	// 1,42
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
