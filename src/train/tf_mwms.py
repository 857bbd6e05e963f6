# edgeprof's distributed-training harness for TensorFlow: one process per worker (one worker per
# node), each started by edgeprof with TF_CONFIG in its environment, MultiWorkerMirroredStrategy
# with ring all-reduces over gRPC on CPUs; without TF_CONFIG it trains alone. The twin of ddp.py:
# the same arguments and CIFAR-10 files in their standard binary format, and from the chief
# (worker 0) one JSON line per epoch and one at the end, nothing else on stdout. Python 3.8+.
import argparse
import glob
import json
import os
import signal
import sys
import threading
import time

# With a cluster, TF's coordination service takes SIGTERM for itself (a preemption notice, and
# training goes on). So SIGTERM is blocked here, before numpy or TF start a thread (threads
# inherit the mask), and a thread of ours waits for it and ends the process. It needs the GIL:
# while TF waits for the other workers to connect, which it does holding the GIL, a SIGTERM
# waits too, and ends the process as soon as they have.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def end_on_sigterm():
    signal.sigwait({signal.SIGTERM})
    os._exit(128 + signal.SIGTERM)


threading.Thread(target=end_on_sigterm, daemon=True).start()

import numpy as np  # noqa: E402  (after the mask)

RECORD = 1 + 3 * 32 * 32


def load(paths, what):
    data = b"".join(open(p, "rb").read() for p in paths)
    n = len(data) // RECORD
    if n == 0:
        raise SystemExit("tf_mwms.py: no CIFAR-10 records in " + what)
    table = np.frombuffer(data[: n * RECORD], dtype=np.uint8).reshape(n, RECORD)
    labels = table[:, 0].astype(np.int32)
    if labels.max() > 9:
        raise SystemExit("tf_mwms.py: labels above 9 in " + what)
    # The files hold R, G, B planes (NCHW); TensorFlow's convolutions on CPUs want NHWC.
    images = table[:, 1:].reshape(n, 3, 32, 32).transpose(0, 2, 3, 1).astype(np.float32) / 255.0
    return images, labels


def shard(n, world, index, seed, epoch):
    # The same permutation on every worker (it depends on seed and epoch only), then this worker's
    # slice. Every worker gets as many samples, so as many steps: the all-reduces must stay in step.
    order = np.random.default_rng(seed * 1000 + epoch).permutation(n)
    per_worker = n // world
    return order[index * per_worker:(index + 1) * per_worker]


def model_maker(name, tf):
    # Looked up before the workers connect: a bad name fails at once, on every worker alike.
    layers = tf.keras.layers
    if name == "cnn":
        # The classic Keras CIFAR-10 example, small enough for 2 cores, with batch normalisation
        # (momentum as PyTorch's default) and global average pooling: without them SGD with
        # momentum 0.9 is unsteady at lr 0.05 and slow at lr 0.01 over 2 short epochs.
        def block(filters):
            return [layers.Conv2D(filters, 3, use_bias=False),
                    layers.BatchNormalization(momentum=0.9), layers.ReLU(), layers.MaxPooling2D()]
        return lambda: tf.keras.Sequential(
            [layers.Input((32, 32, 3))] + block(32) + block(64)
            + [layers.GlobalAveragePooling2D(), layers.Dense(64, activation="relu"),
               layers.Dense(10)])
    # Any tf.keras.applications constructor in snake_case: mobilenet_v2 -> MobileNetV2. Its
    # modules (resnet50, mobilenet_v2) have the same names but are not callable.
    want = name.replace("_", "").lower()
    for attr in dir(tf.keras.applications):
        make = getattr(tf.keras.applications, attr)
        if attr.lower() == want and callable(make):
            return lambda: make(weights=None, input_shape=(32, 32, 3), classes=10,
                                classifier_activation=None)  # logits, as the loss expects
    raise SystemExit("tf_mwms.py: unknown model %r: neither cnn nor a tf.keras.applications "
                     "name in snake_case (e.g. mobilenet_v2)" % name)


def train(a, out):
    import tensorflow as tf  # after TF_CPP_MIN_LOG_LEVEL is set and stdout is set aside

    make_model = model_maker(a.model, tf)
    # Thread pools can only be sized before the runtime starts, i.e. before the strategy.
    tf.config.threading.set_intra_op_parallelism_threads(max(1, a.threads))
    tf.config.threading.set_inter_op_parallelism_threads(2)  # room for a collective beside compute
    tf.keras.utils.set_random_seed(a.seed)
    ring = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    # Reads TF_CONFIG and waits here until every worker has connected.
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
    resolver = strategy.cluster_resolver
    world = len(resolver.cluster_spec().as_dict().get("worker", [])) or 1
    index = resolver.task_id if resolver.task_type == "worker" else 0
    # Replicas on this worker: one CPU, or one per GPU (each then sees the same local batch).
    local = len(strategy.extended.worker_devices)

    # Read once connected: the peers of a worker that cannot are told within the coordination
    # service's heartbeat timeout (~10 s); before, they would wait for it to connect (1 h).
    pattern = os.path.join(a.data, "data_batch_*.bin")
    train_x, train_y = load(sorted(glob.glob(pattern)), pattern)
    test_path = os.path.join(a.data, "test_batch.bin")
    test_x, test_y = load([test_path], test_path)
    # Per-channel statistics of the training set, as ddp.py (torch.std is the n-1 one).
    mean = train_x.mean(axis=(0, 1, 2), keepdims=True)
    std = np.maximum(train_x.std(axis=(0, 1, 2), keepdims=True, ddof=1), 1e-6)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std

    with strategy.scope():  # variables mirrored, initial values broadcast from worker 0
        model = make_model()
        optimizer = tf.keras.optimizers.SGD(learning_rate=a.lr, momentum=0.9, weight_decay=5e-4)

    # One signature for full and short batches: no retracing (and no new collectives) per shape.
    images, labels = tf.TensorSpec([None, 32, 32, 3], tf.float32), tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[images, labels])
    def train_step(x, y):
        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                per_example = tf.keras.losses.sparse_categorical_crossentropy(
                    y, logits, from_logits=True)
                # Divided by the global batch (local batch x replicas in sync), so the summed
                # gradients the optimizer all-reduces are the global batch's mean gradient.
                loss = tf.nn.compute_average_loss(per_example)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            hits = tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y)
            return tf.stack([tf.reduce_sum(tf.cast(hits, tf.float64)),
                             tf.cast(tf.size(y), tf.float64),
                             tf.reduce_sum(tf.cast(per_example, tf.float64))])
        # This worker's counts, from its first replica (any others saw the same batch).
        return strategy.experimental_local_results(strategy.run(step, args=(x, y)))[0]

    # Batch-norm statistics are not all-reduced: each worker's follow its own batches. They are
    # averaged before each validation, so that every worker evaluates the same model.
    stats = [v for v in model.non_trainable_variables if "float" in str(v.dtype)]

    @tf.function
    def average_stats():
        flat = strategy.run(lambda: tf.concat(
            [tf.reshape(tf.cast(v.value, tf.float32), [-1]) for v in stats], 0))
        flat = strategy.reduce(tf.distribute.ReduceOp.MEAN, flat, axis=None)
        at = 0
        for v in stats:
            size = int(np.prod(v.shape))
            v.assign(tf.cast(tf.reshape(flat[at:at + size], v.shape), v.dtype))
            at += size

    @tf.function(input_signature=[images])
    def predict(x):
        return tf.argmax(model(x, training=False), 1, output_type=tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([5], tf.float64)])
    def all_sum(v):
        # Each replica gives its worker's counts: the sum has every worker's `local` times.
        summed = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(v)),
                                 axis=None)
        return summed / local

    start = time.perf_counter()
    for epoch in range(a.epochs):
        mine = shard(len(train_y), world, index, a.seed, epoch)
        counts = np.zeros(5)  # train hits, train samples, train loss sum, val hits, val samples
        for i in range(0, len(mine), a.batch):
            idx = mine[i:i + a.batch]
            counts[:3] += train_step(train_x[idx], train_y[idx]).numpy()
        if stats:  # the same model everywhere, so the same collectives on every worker
            average_stats()
        per_worker = (len(test_y) + world - 1) // world
        lo, hi = index * per_worker, min(len(test_y), (index + 1) * per_worker)
        for i in range(lo, hi, 256):
            j = min(hi, i + 256)
            counts[3] += float(np.sum(predict(test_x[i:j]).numpy() == test_y[i:j]))
            counts[4] += j - i
        # One collective on every worker, whatever its share of the test set (maybe none).
        counts = all_sum(counts).numpy()
        if index == 0:
            out.write(json.dumps({
                "epoch": epoch + 1,
                "train_acc": counts[0] / max(1.0, counts[1]),
                "loss": counts[2] / max(1.0, counts[1]),
                "val_acc": counts[3] / max(1.0, counts[4]),
                "elapsed_s": time.perf_counter() - start,
            }) + "\n")
            out.flush()
    if index == 0:
        out.write(json.dumps({"done": True, "wall_s": time.perf_counter() - start, "world": world,
                              "framework": "tensorflow " + tf.__version__}) + "\n")
        out.flush()


def reason(e):
    # A failed op's message opens with where the op was defined (a traceback); the cause follows.
    lines = [line.strip() for line in str(e).splitlines()]
    lines = [line for line in lines if line and not line.startswith(
        ("Graph execution error", "Detected at node", "File "))]
    return " ".join(" ".join(lines).split())[:400]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--model", default="cnn")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.batch < 1:
        raise SystemExit("tf_mwms.py: --batch must be at least 1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # stdout carries the JSON lines alone: they go to a copy of it, and whatever else writes to
    # it (Python prints, TensorFlow's C++ side) goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        train(a, out)
    except Exception as e:  # one line on stderr and a non-zero status; TF's messages span many
        print("tf_mwms.py: %s: %s" % (type(e).__name__, reason(e)), file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
