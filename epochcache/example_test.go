package epochcache_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
)

func Example() {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("p0", 0o755); err != nil {
		panic(err)
	}
	c, err := epochcache.Open(fs, "p0/"+epochcache.CheckpointFileName)
	if err != nil {
		panic(err)
	}
	// Epoch 0 wrote offsets [0, 120), epoch 3 [120, 450), epoch 4 from 450.
	for _, e := range []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 120}, {Epoch: 4, StartOffset: 450}} {
		if _, err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			panic(err)
		}
	}
	fmt.Println(c)
	const leo = 600
	fmt.Println(c.EndOffsetFor(4, leo)) // latest epoch: ends at the LEO
	fmt.Println(c.EndOffsetFor(3, leo)) // ends where epoch 4 starts
	fmt.Println(c.EndOffsetFor(2, leo)) // never led: floor epoch 0, ends at 120
	fmt.Println(c.EpochForOffset(449))

	// The log truncated to 300: the truncation is flushed later.
	c.TruncateFromEnd(300)
	if err := c.Flush(); err != nil {
		panic(err)
	}
	reopened, err := epochcache.Open(fs, "p0/"+epochcache.CheckpointFileName)
	if err != nil {
		panic(err)
	}
	fmt.Println(reopened)
	// Output:
	// 0@0 3@120 4@450
	// (4, 600)
	// (3, 450)
	// (0, 120)
	// 3 true
	// 0@0 3@120
}
