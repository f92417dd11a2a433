//go:build !linux

package offheap

import "errors"

// remap is Linux's: elsewhere a mapping grows by copying.
func remap([]byte, int) ([]byte, error) { return nil, errors.ErrUnsupported }
