package objstore_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

func Example() {
	ctx := context.Background()
	var s objstore.Store = mem.New(mem.Options{})
	defer s.Close()

	seg := "records 0..9"
	key := "orders-0/00000000000000000000-attempt1.log"
	// IfNoneMatch: a retried upload never replaces another attempt's object.
	opts := objstore.PutOptions{IfNoneMatch: true}
	if err := s.Put(ctx, key, strings.NewReader(seg), int64(len(seg)), opts); err != nil {
		fmt.Println(err)
	}
	err := s.Put(ctx, key, strings.NewReader("other"), 5, opts)
	fmt.Println(objstore.IsPreconditionFailed(err))

	b, _ := objstore.ReadRange(ctx, s, key, 8, 4)
	fmt.Printf("%s\n", b)
	_, err = objstore.ReadRange(ctx, s, key, 8, 10)
	fmt.Println(err)

	_ = objstore.ListAll(ctx, s, "orders-0/", func(o objstore.ObjectInfo) error {
		fmt.Println(o.Key, o.Size)
		return nil
	})
	// Output:
	// true
	// 0..9
	// get "orders-0/00000000000000000000-attempt1.log": objstore: invalid range: [8, 18) beyond size 12
	// orders-0/00000000000000000000-attempt1.log 12
}
