// Tessera's bounded-FIFO C-simulation (tessera/hls_templates/sim/tessera_bounded_stream.h,
// installed as hls_stream.h ahead of ap_types' for `tessera check`).
//
// hls4ml's C-simulation runs the layers of a DATAFLOW region one after the other over
// unbounded streams: a FIFO too shallow for the design passes.  This header gives
// hls::stream a depth and blocking semantics, and the generated top function (rewritten by
// tessera/compiler/hlscheck/fifo.py) runs every layer of the region as its own thread, as
// the hardware runs its processes.  A write to a full FIFO waits, a read of an empty one
// waits; when every process of the region waits, the design deadlocks in hardware too: the
// check prints the FIFOs that are full (name, depth) and exits with status 3.
// Streams without a declared depth (the top function's ports, a kernel's own local
// streams) stay unbounded.
#ifndef X_HLS_STREAM_SIM_H
#define X_HLS_STREAM_SIM_H
#define TESSERA_BOUNDED_STREAM_H_

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <string>
#include <vector>

// Each process's stack: the layers keep their working arrays there (hls4ml's io_stream conv
// layers hold a K*K*C x F product array per pixel: tens of MB for ResNet-18's last convs).
// A std::thread gets the C library's default (the stack limit, commonly 8 MB); the pages are
// only reserved, so a generous size costs nothing until used.
#ifndef TESSERA_FIFO_STACK_BYTES
#define TESSERA_FIFO_STACK_BYTES (512UL << 20)
#endif

namespace tessera_fifo {

struct Channel;

// What every stream and process shares: one lock, the processes running and waiting.
struct State {
    std::mutex lock;
    int running = 0;
    int waiting = 0;
    std::vector<Channel *> channels;
    // Per bounded FIFO: the most elements it ever held, and its depth (printed at exit).
    std::vector<std::string> names;
    std::vector<unsigned long> peaks, depths;
    ~State() {
        for (size_t i = 0; i < names.size(); i++)
            std::fprintf(stderr, "tessera-fifo: FIFO %s depth %lu peak %lu\n", names[i].c_str(), depths[i], peaks[i]);
    }
    void record(const std::string &name, unsigned long depth, unsigned long peak) {
        for (size_t i = 0; i < names.size(); i++)
            if (names[i] == name) {
                peaks[i] = peak > peaks[i] ? peak : peaks[i];
                return;
            }
        names.push_back(name);
        depths.push_back(depth);
        peaks.push_back(peak);
    }
};

inline State &state() {
    static State s;
    return s;
}

struct Channel {
    std::string name;
    unsigned long depth = 0; // 0: unbounded
    unsigned long peak = 0;
    bool reader_waits = false, writer_waits = false;
    std::condition_variable readable, writable;
};

[[noreturn]] inline void deadlock() {
    State &s = state();
    std::fprintf(stderr, "tessera-fifo: deadlock: all %d processes of the dataflow region wait\n", s.running);
    for (Channel *c : s.channels)
        if (c->writer_waits)
            std::fprintf(stderr, "tessera-fifo: full FIFO %s depth %lu blocks its writer\n", c->name.c_str(), c->depth);
    for (Channel *c : s.channels)
        if (c->reader_waits)
            std::fprintf(stderr, "tessera-fifo: empty FIFO %s blocks its reader\n", c->name.c_str());
    std::fflush(stderr);
    std::_Exit(3);
}

// Wait on cv until ready().  A waiting process counts as waiting until the process that
// makes it ready wakes it (wake(): the count drops at once, not when the thread is next
// scheduled); a wait that leaves every process waiting is a deadlock.
template <class Ready> void wait(std::unique_lock<std::mutex> &ul, std::condition_variable &cv, bool &flag, Ready ready) {
    State &s = state();
    while (!ready()) {
        flag = true;
        s.waiting++;
        if (s.running > 0 && s.waiting >= s.running)
            deadlock();
        cv.wait(ul, [&flag]() { return !flag; });
    }
}

inline void wake(std::condition_variable &cv, bool &flag) {
    if (flag) {
        flag = false;
        state().waiting--;
        cv.notify_one();
    }
}

// A dataflow region: its processes, added in order (add), then run as one thread each and
// joined (run).  The processes all count as running before the first one starts, so a
// process that waits before the others are up is not a deadlock.
class Region {
  public:
    void add(std::function<void()> process) { processes_.push_back(process); }
    void run() {
        State &s = state();
        {
            std::lock_guard<std::mutex> g(s.lock);
            s.running += (int)processes_.size();
        }
        std::vector<pthread_t> threads(processes_.size());
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, TESSERA_FIFO_STACK_BYTES);
        for (size_t i = 0; i < processes_.size(); i++)
            if (pthread_create(&threads[i], &attr, &Region::start, &processes_[i]) != 0) {
                std::fprintf(stderr, "tessera-fifo: cannot start process %zu of the dataflow region\n", i);
                std::_Exit(4);
            }
        pthread_attr_destroy(&attr);
        for (pthread_t &t : threads)
            pthread_join(t, nullptr);
        processes_.clear();
    }

  private:
    static void *start(void *process) {
        (*static_cast<std::function<void()> *>(process))();
        State &st = state();
        std::lock_guard<std::mutex> g(st.lock);
        st.running--;
        if (st.running > 0 && st.waiting >= st.running)
            deadlock();
        return nullptr;
    }
    std::vector<std::function<void()>> processes_;
};

} // namespace tessera_fifo

namespace hls {

template <typename T> class stream {
  public:
    stream() { attach("stream"); }
    stream(const char *name) { attach(name); }
    stream(const std::string &name) { attach(name); }
    stream(const stream &) = delete;
    stream &operator=(const stream &) = delete;
    ~stream() {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        if (ch_.depth)
            tessera_fifo::state().record(ch_.name, ch_.depth, ch_.peak);
        std::vector<tessera_fifo::Channel *> &cs = tessera_fifo::state().channels;
        for (size_t i = 0; i < cs.size(); i++)
            if (cs[i] == &ch_) {
                cs.erase(cs.begin() + i);
                break;
            }
    }

    // The declared depth (#pragma HLS STREAM depth=N), set by the rewritten top function.
    void tessera_bound(unsigned long depth) { ch_.depth = depth; }
    unsigned long tessera_peak() const { return ch_.peak; }

    bool empty() {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        return data_.empty();
    }
    bool full() {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        return ch_.depth && data_.size() >= ch_.depth;
    }
    size_t size() {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        return data_.size();
    }

    T read() {
        std::unique_lock<std::mutex> ul(tessera_fifo::state().lock);
        tessera_fifo::wait(ul, ch_.readable, ch_.reader_waits, [this]() { return !data_.empty(); });
        T head = data_.front();
        data_.pop_front();
        tessera_fifo::wake(ch_.writable, ch_.writer_waits);
        return head;
    }
    void read(T &head) { head = read(); }
    void operator>>(T &head) { head = read(); }
    bool read_nb(T &head) {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        if (data_.empty())
            return false;
        head = data_.front();
        data_.pop_front();
        tessera_fifo::wake(ch_.writable, ch_.writer_waits);
        return true;
    }

    void write(const T &tail) {
        std::unique_lock<std::mutex> ul(tessera_fifo::state().lock);
        tessera_fifo::wait(ul, ch_.writable, ch_.writer_waits,
                           [this]() { return ch_.depth == 0 || data_.size() < ch_.depth; });
        push(tail);
    }
    void operator<<(const T &tail) { write(tail); }
    bool write_nb(const T &tail) {
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        if (ch_.depth && data_.size() >= ch_.depth)
            return false;
        push(tail);
        return true;
    }

  private:
    void attach(const std::string &name) {
        ch_.name = name;
        std::lock_guard<std::mutex> g(tessera_fifo::state().lock);
        tessera_fifo::state().channels.push_back(&ch_);
    }
    void push(const T &tail) {
        data_.push_back(tail);
        if (data_.size() > ch_.peak)
            ch_.peak = data_.size();
        tessera_fifo::wake(ch_.readable, ch_.reader_waits);
    }

    std::deque<T> data_;
    tessera_fifo::Channel ch_;
};

} // namespace hls

#endif
