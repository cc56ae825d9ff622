//go:build !linux

package main

// peakRSS is not measured here; the service table's RSS columns then read 0.
func peakRSS() int64 { return 0 }
