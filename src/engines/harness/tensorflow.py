# edgeprof harness part: TensorFlow runs a Keras model built layer by layer from the zoo model's
# description, with the zoo's seeded weights (so its outputs compare with the other engines'),
# as a tf.function graph (optionally XLA-compiled) or eagerly. With `export_tflite` in the
# request it converts that model to a .tflite file for the tflite harness instead of timing it.
FRAMEWORK = "tensorflow"

OPTIONS = ("mode", "xla", "inter_op_threads")
MODES = ("function", "eager")


def adaptive_matrix(np, length, out):
    """PyTorch's adaptive average pooling of `length` cells to `out`, as an (out, length) matrix."""
    m = np.zeros((out, length), dtype=np.float32)
    for i in range(out):
        start = (i * length) // out
        end = -((-(i + 1) * length) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def build_keras(tf, np, model, params, epsilon, finite_padding=False):
    keras = tf.keras
    L = keras.layers
    n, c, h, w = model["input_shape"]
    inputs = keras.Input(shape=(h, w, c), batch_size=n, name="input")
    values = {}
    later = []  # (layer, weights) set once the model is built

    def value(v):
        return inputs if v == "Input" else values[v["Layer"]]

    def nchw(v):
        return model["input_shape"] if v == "Input" else model["layers"][v["Layer"]]["output_shape"]

    for i, layer in enumerate(model["layers"]):
        op = layer["op"]
        kind = op["kind"]
        name = layer["name"]
        ins = [value(v) for v in layer["inputs"]]
        x = ins[0] if ins else None
        if kind == "conv2d":
            ph, pw = op["padding"]
            if ph or pw:
                x = L.ZeroPadding2D(((ph, ph), (pw, pw)))(x)
            groups, cin, cout = op["groups"], op["in_channels"], op["out_channels"]
            kh, kw = op["kernel"]
            weight = params[name + ".weight"]  # (out, in / groups, kh, kw)
            if groups > 1 and groups == cin:
                mult = cout // cin
                conv = L.DepthwiseConv2D(
                    (kh, kw), strides=op["stride"], depth_multiplier=mult, use_bias=op["bias"]
                )
                kernel = weight.reshape(cin, mult, kh, kw).transpose(2, 3, 0, 1)
            else:
                conv = L.Conv2D(
                    cout, (kh, kw), strides=op["stride"], groups=groups, use_bias=op["bias"]
                )
                kernel = weight.transpose(2, 3, 1, 0)
            x = conv(x)
            later.append((conv, [kernel] + ([params[name + ".bias"]] if op["bias"] else [])))
        elif kind == "batch_norm2d":
            bn = L.BatchNormalization(epsilon=op.get("eps", epsilon))
            x = bn(x)
            later.append(
                (
                    bn,
                    [
                        params[name + ".weight"],
                        params[name + ".bias"],
                        params[name + ".running_mean"],
                        params[name + ".running_var"],
                    ],
                )
            )
        elif kind == "relu":
            x = L.ReLU()(x)
        elif kind == "relu6":
            x = L.ReLU(max_value=6.0)(x)
        elif kind == "hardswish":
            x = L.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) / 6.0)(x)
        elif kind == "hardsigmoid":
            x = L.Lambda(lambda t: tf.nn.relu6(t + 3.0) / 6.0)(x)
        elif kind == "sigmoid":
            x = L.Lambda(tf.math.sigmoid)(x)
        elif kind == "silu":
            x = L.Lambda(lambda t: t * tf.math.sigmoid(t))(x)
        elif kind == "channel_scale":
            x = L.Multiply()(ins)
        elif kind == "max_pool2d":
            ph, pw = op["padding"]
            _, _, ih, iw = nchw(layer["inputs"][0])
            _, _, oh, ow = layer["output_shape"]
            (kh, kw), (sh, sw) = op["kernel"], op["stride"]
            # Ceil mode: the cells the last window runs past the end, padded like the rest.
            eh = max(0, (oh - 1) * sh + kh - (ih + 2 * ph))
            ew = max(0, (ow - 1) * sw + kw - (iw + 2 * pw))
            if ph or pw or eh or ew:
                # Padded cells never win, as in PyTorch: pad with -inf, not zeros.
                pads = [[0, 0], [ph, ph + eh], [pw, pw + ew], [0, 0]]
                if finite_padding:
                    # An integer model has no -inf: pad with the tensor's own least value,
                    # which wins only where every cell of the window is that value.
                    def least(t, p=pads):
                        m = tf.reduce_min(t)
                        return tf.pad(t - m, p) + m

                    x = L.Lambda(least)(x)
                else:
                    x = L.Lambda(lambda t, p=pads: tf.pad(t, p, constant_values=float("-inf")))(x)
            x = L.MaxPooling2D(op["kernel"], strides=op["stride"], padding="valid")(x)
        elif kind == "adaptive_avg_pool2d":
            _, _, ih, iw = nchw(layer["inputs"][0])
            oh, ow = op["output"]
            if (oh, ow) == (1, 1):
                x = L.GlobalAveragePooling2D(keepdims=True)(x)
            elif ih % oh == 0 and iw % ow == 0:
                x = L.AveragePooling2D((ih // oh, iw // ow))(x)
            else:
                mh = tf.constant(adaptive_matrix(np, ih, oh))
                mw = tf.constant(adaptive_matrix(np, iw, ow))
                x = L.Lambda(lambda t, a=mh, b=mw: tf.einsum("oh,nhwc,pw->nopc", a, t, b))(x)
        elif kind == "add":
            x = L.Add()(ins)
        elif kind == "concat":
            x = L.Concatenate(axis=-1)(ins)
        elif kind == "channel_shuffle":
            _, ch, hh, ww = nchw(layer["inputs"][0])
            g = op["groups"]
            x = L.Reshape((hh, ww, g, ch // g))(x)
            x = L.Permute((1, 2, 4, 3))(x)
            x = L.Reshape((hh, ww, ch))(x)
        elif kind == "channel_slice":
            x = L.Lambda(lambda t, s=op["start"], e=op["end"]: t[..., s:e])(x)
        elif kind == "flatten":
            # Flatten in PyTorch's (channels, height, width) order, which the weights expect.
            shape = nchw(layer["inputs"][0])
            if len(shape) == 4 and shape[2:] == [1, 1]:
                # One cell: no order to keep. A plain reshape (LiteRT's int8 kernels fail on
                # the fully connected layer the converter makes of permute and flatten here).
                x = L.Reshape((shape[1],))(x)
            else:
                if len(shape) == 4:
                    x = L.Permute((3, 1, 2))(x)
                x = L.Flatten()(x)
        elif kind == "linear":
            dense = L.Dense(op["out_features"], use_bias=op["bias"])
            x = dense(x)
            weights = [params[name + ".weight"].T]
            if op["bias"]:
                weights.append(params[name + ".bias"])
            later.append((dense, weights))
        elif kind == "dropout":
            pass  # the identity at inference
        else:
            raise HarnessError("the TensorFlow harness cannot build a %s layer (%s)" % (kind, name))
        values[i] = x
    net = keras.Model(inputs, value(model["output"]))
    for layer, weights in later:
        layer.set_weights(weights)
    return net


def configure(tf, condition, options):
    """Threads and devices, which TensorFlow fixes before it runs anything."""
    threads = threads_of(condition)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(int(options.get("inter_op_threads", 1)))
    gpus = tf.config.list_physical_devices("GPU")
    device = condition["device"]
    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
        return threads, "/CPU:0"
    gpu = int(device.split(":")[1])
    if gpu >= len(gpus):
        raise HarnessError(
            "TensorFlow %s sees %d GPU(s) here; there is no %s" % (tf.__version__, len(gpus), device)
        )
    return threads, "/GPU:%d" % gpu


def export_tflite(tf, np, request, net, parameters):
    """Converts the Keras model to .tflite beside a note of what it was made from: float32, or
    in the condition's precision with TensorFlow Lite's own post-training tools (float16
    weights; full-integer int8 with the request's calibration batches as the representative
    dataset, inputs and outputs kept float32)."""
    # From the Keras model itself: a concrete function's converter leaves Keras 3's weights as
    # resource variables that LiteRT reads as uninitialised (NaN outputs).
    converter = tf.lite.TFLiteConverter.from_keras_model(net)
    precision = request["condition"].get("precision", "fp32")
    made = "float32"
    if precision == "fp16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
        made = "float16 weights (post-training float16 quantization)"
    elif precision == "int8":
        batches = request.get("calibration") or []
        if not batches:
            raise HarnessError("int8 is calibrated on batches edgeprof writes, and the request has none")

        def representative():
            for batch in batches:
                x = np.load(batch[0]["file"], allow_pickle=False).astype(np.float32)
                yield [np.ascontiguousarray(x.transpose(0, 2, 3, 1))]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        made = "full-integer int8 (%d calibration batches; float32 inputs and outputs)" % len(batches)
    elif precision != "fp32":
        raise HarnessError("TensorFlow Lite's converter makes no %s models" % precision)
    data = converter.convert()
    path = request["export_tflite"]
    with open(path + ".part", "wb") as f:
        f.write(data)
    with open(path + ".json", "w") as f:
        json.dump({"parameters": parameters, "tensorflow": tf.__version__, "precision": made}, f)
    os.replace(path + ".part", path)
    emit({"type": "exported", "path": path, "parameters": parameters, "bytes": len(data)})


# Keras's mixed precision policies: float32 variables, computation in the lower precision.
POLICIES = {"fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


class Session:
    def __init__(self, request, np):
        tf = need("tensorflow")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        self.threads, device_name = configure(tf, condition, options)
        precision = condition.get("precision", "fp32")
        exporting = bool(request.get("export_tflite"))
        if not exporting and precision in POLICIES:
            tf.keras.mixed_precision.set_global_policy(POLICIES[precision])
        elif not exporting and precision != "fp32":
            raise HarnessError(
                "TensorFlow runs %s through the tflite engine's conversion, not in Keras" % precision
            )
        model, params, epsilon = read_description(np, request["model_file"])
        with tf.device(device_name):
            net = build_keras(
                tf, np, model, params, epsilon, finite_padding=exporting and precision == "int8"
            )
        del params
        self.parameters = int(sum(int(np.prod(v.shape)) for v in net.trainable_weights))
        if exporting:
            export_tflite(tf, np, request, net, self.parameters)
            raise SystemExit(0)
        self.mode = choice(options, "mode", MODES, "function")
        xla = bool(options.get("xla", False))
        x = np.ascontiguousarray(read_input(np, request).transpose(0, 2, 3, 1))
        with tf.device(device_name):
            self.input = tf.constant(x)
        if self.mode == "function":
            self.call = tf.function(lambda t: net(t, training=False), jit_compile=xla)
        else:
            self.call = lambda t: net(t, training=False)
        self.device_name = device_name
        self.tf = tf
        self.device = condition["device"]
        self.version = tf.__version__
        self.np = np
        self.note = "Keras %s model, %s%s, intra-op threads %d%s" % (
            tf.keras.__version__ if hasattr(tf.keras, "__version__") else "",
            self.mode,
            " + XLA" if xla else "",
            self.threads,
            ", Keras mixed precision %s" % POLICIES[precision] if precision in POLICIES else "",
        )

    def infer(self):
        with self.tf.device(self.device_name):
            out = self.call(self.input)
        # .numpy() waits for the result (and copies it to the host, a few kB).
        return out.numpy()

    def output(self, out):
        # A mixed precision model answers in its compute type; the record keeps float32.
        return self.np.asarray(out, dtype=self.np.float32)

    def outputs(self, out):
        return [self.output(out)]


def load(request, np):
    return Session(request, np)
