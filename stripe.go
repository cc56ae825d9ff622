package sftp

import "sync"

// channelSet holds the SFTP channels of a Client: the main one, and the extra ones
// opened for striping large transfers, kept for reuse.
type channelSet struct {
	mu    sync.Mutex
	conns []*conn // conns[0] is the main channel
}

func (s *channelSet) init(main *conn) { s.conns = []*conn{main} }

// closeAll closes every channel and waits for their readers.
func (s *channelSet) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
}
