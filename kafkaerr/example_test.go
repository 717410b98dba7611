package kafkaerr_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/wal"
)

// A broker writes the partition error of a fetch or produce response
// from the library's error.
func ExampleCode() {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("orders-0", 0o755)
	l, err := log.Open("orders-0", log.Options{FS: fs})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	// A consumer fetches past the log end.
	_, err = l.Read(nil, 42, 1<<20, log.IsolationHighWatermark, true)
	c := kafkaerr.Code(err)
	fmt.Println(c.Message, c.Code, kafkaerr.Retriable(err))

	// A successful read is NONE (a nil *kerr.Error, code 0).
	_, err = l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
	fmt.Println(kafkaerr.Code(err) == nil, kafkaerr.ErrorCode(err))

	// A diskless fetch whose object read failed: retriable.
	err = &wal.StorageError{ObjectKey: "wal/0001", Err: wal.ErrObjectRead, Cause: fmt.Errorf("503 slow down")}
	fmt.Println(kafkaerr.Code(err).Message, kafkaerr.Retriable(err))
	// Output:
	// OFFSET_OUT_OF_RANGE 1 false
	// true 0
	// KAFKA_STORAGE_ERROR true
}
