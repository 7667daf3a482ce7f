// Package sgl holds helpers for scatter/gather lists of descriptor
// segments that both package vi and package bonding use.
package sgl

import "github.com/ethervia/ethervia/descriptors"

// Scatter copies src into the scatter/gather list segs at byte offset off
// of the list. What does not fit is dropped: the caller has checked the
// message against the list's length.
func Scatter(segs []descriptors.Segment, off int, src []byte) {
	for i := range segs {
		if len(src) == 0 {
			return
		}
		b := segs[i].Buf
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(b[off:], src)
		src = src[k:]
		off = 0
	}
}
