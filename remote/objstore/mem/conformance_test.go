package mem_test

import (
	"testing"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/remote/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.RunConformance(t, func(t *testing.T) objstore.Store {
		return mem.New(mem.Options{Seed: 1})
	})
}
