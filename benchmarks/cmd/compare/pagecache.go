package main

import "os"

// warmPageCache writes n bytes to a scratch file in dir and removes it,
// untimed, before a row that stores n bytes on this machine. On this
// project's VMs (free page reporting on: the kernel hands free memory
// back to the host) the first copy into memory the guest has not touched
// lately costs about 1 CPU s/GB more in write(2) (1.36-1.39 against
// 0.42-0.44 s/GB for the same raw Puts of 1 GiB, idle before against
// right after another run). Without this, whichever row runs first after
// an idle spell or a larger row pays it, and the WAL rows' ratios
// measured the order of the rows. The file is removed unsynced, so its
// pages are freed at once and the row that follows draws from them.
func warmPageCache(dir string, n int64) error {
	f, err := os.CreateTemp(dir, "warm-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
