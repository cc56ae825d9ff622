package sftp

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// A pipe from WithPipeOpener is typically a new `ssh` process, logging in until its
// server answers INIT. At most maxDialing of them start at once (sshd drops logins past
// MaxStartups): a new pipe is asked for only when an earlier one's server has sent
// VERSION. synctest.Wait lets the test count the opener's calls once every goroutine is
// blocked, so a Client that started more pipes at once could not pass.
func TestPipeOpenerStartsFewAtOnce(t *testing.T) {
	const pipes = 16
	synctest.Test(t, func(t *testing.T) {
		type server struct {
			in  *io.PipeReader // what the client writes
			out *io.PipeWriter // what the client reads
		}
		servers := make(chan server, pipes)
		var calls atomic.Int32
		c := &Client{}
		c.opts.openPipe = func(context.Context) (io.Reader, io.WriteCloser, error) {
			calls.Add(1)
			cr, sw := io.Pipe()
			sr, cw := io.Pipe()
			servers <- server{sr, sw}
			return cr, cw, nil
		}
		p := newPipeChannels(c)
		defer p.close()
		lanes := make(chan *conn, pipes)
		for range pipes {
			go func() {
				cn, err := p.open(context.Background())
				if err != nil {
					t.Error(err)
					cn = nil
				}
				lanes <- cn
			}()
		}
		synctest.Wait()
		require.EqualValues(t, maxDialing, calls.Load(), "pipes started before any server answered")
		for answered := 1; answered <= pipes; answered++ {
			s := <-servers
			go func() {
				init := make([]byte, 9)
				if _, err := io.ReadFull(s.in, init); err != nil {
					t.Error(err)
					return
				}
				_, err := s.out.Write([]byte{0, 0, 0, 5, 2, 0, 0, 0, 3}) // VERSION 3
				if err != nil {
					t.Error(err)
				}
			}()
			synctest.Wait()
			require.EqualValues(t, min(pipes, maxDialing+answered), calls.Load(), "pipes started after %d answered", answered)
		}
		for range pipes {
			cn := <-lanes
			require.NotNil(t, cn)
			require.NoError(t, cn.failed(), "the lane got its VERSION")
			cn.close()
		}
	})
}
