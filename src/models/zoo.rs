//! The built-in model zoo: the seeds' five CNNs, six edge models and the other widths of
//! ShuffleNetV2 and MNASNet, layer for layer as torchvision defines them.
//!
//! Layer names follow torchvision's module paths (`layer1.0.conv1`, `features.3.conv.1.0`, …);
//! functional operations that torchvision does not hold as modules (residual additions,
//! concatenations, chunking, channel shuffles, flattening, extra uses of a shared ReLU) get a name
//! beside the module they belong to (`layer1.0.add`, `stage2.1.shuffle`, `layer1.0.relu_1`).

use super::graph::{GraphBuilder, GraphError, Model, Op, ValueId};
use thiserror::Error;

mod edge;

/// The smallest spatial input edge the zoo accepts (every model keeps a ≥1×1 feature map).
pub const MIN_SPATIAL: usize = 32;
/// The largest accepted edge: far above any edge workload, low enough that costs cannot overflow.
pub const MAX_SPATIAL: usize = 8192;
pub const MAX_BATCH: usize = 4096;
pub const MAX_CHANNELS: usize = 64;

/// Parameters that select one instance of a zoo architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelParams {
    pub num_classes: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub batch: usize,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            num_classes: 1000,
            channels: 3,
            height: 224,
            width: 224,
            batch: 1,
        }
    }
}

/// One entry of the zoo.
pub struct ZooEntry {
    pub name: &'static str,
    pub description: &'static str,
    build: fn(&mut GraphBuilder, usize) -> Result<(), GraphError>,
}

pub const ZOO: &[ZooEntry] = &[
    ZooEntry {
        name: "shufflenet_v2_x0_5",
        description: "ShuffleNetV2 0.5× (Ma et al., 2018), torchvision shufflenet_v2_x0_5",
        build: shufflenet_v2_x0_5,
    },
    ZooEntry {
        name: "mobilenet_v2",
        description: "MobileNetV2 (Sandler et al., 2018), torchvision mobilenet_v2",
        build: mobilenet_v2,
    },
    ZooEntry {
        name: "resnet34",
        description: "ResNet-34 (He et al., 2016), torchvision resnet34",
        build: resnet34,
    },
    ZooEntry {
        name: "resnet50",
        description: "ResNet-50 v1.5 (stride on the 3×3 conv), torchvision resnet50",
        build: resnet50,
    },
    ZooEntry {
        name: "vgg19",
        description: "VGG-19 (Simonyan & Zisserman, 2014), torchvision vgg19",
        build: vgg19,
    },
    ZooEntry {
        name: "resnet18",
        description: "ResNet-18 (He et al., 2016), torchvision resnet18",
        build: edge::resnet18,
    },
    ZooEntry {
        name: "squeezenet1_1",
        description: "SqueezeNet 1.1 (Iandola et al., 2016), torchvision squeezenet1_1",
        build: edge::squeezenet1_1,
    },
    ZooEntry {
        name: "mnasnet1_0",
        description: "MNASNet 1.0 (Tan et al., 2019), torchvision mnasnet1_0",
        build: edge::mnasnet1_0,
    },
    ZooEntry {
        name: "mobilenet_v3_small",
        description: "MobileNetV3 small (Howard et al., 2019), torchvision mobilenet_v3_small",
        build: edge::mobilenet_v3_small,
    },
    ZooEntry {
        name: "mobilenet_v3_large",
        description: "MobileNetV3 large (Howard et al., 2019), torchvision mobilenet_v3_large",
        build: edge::mobilenet_v3_large,
    },
    ZooEntry {
        name: "efficientnet_b0",
        description: "EfficientNet-B0 (Tan & Le, 2019), torchvision efficientnet_b0",
        build: edge::efficientnet_b0,
    },
    ZooEntry {
        name: "shufflenet_v2_x1_0",
        description: "ShuffleNetV2 1.0× (Ma et al., 2018), torchvision shufflenet_v2_x1_0",
        build: shufflenet_v2_x1_0,
    },
    ZooEntry {
        name: "shufflenet_v2_x1_5",
        description: "ShuffleNetV2 1.5× (Ma et al., 2018), torchvision shufflenet_v2_x1_5",
        build: shufflenet_v2_x1_5,
    },
    ZooEntry {
        name: "shufflenet_v2_x2_0",
        description: "ShuffleNetV2 2.0× (Ma et al., 2018), torchvision shufflenet_v2_x2_0",
        build: shufflenet_v2_x2_0,
    },
    ZooEntry {
        name: "mnasnet0_5",
        description: "MNASNet 0.5 (Tan et al., 2019), torchvision mnasnet0_5",
        build: edge::mnasnet0_5,
    },
    ZooEntry {
        name: "mnasnet0_75",
        description: "MNASNet 0.75 (Tan et al., 2019), torchvision mnasnet0_75",
        build: edge::mnasnet0_75,
    },
    ZooEntry {
        name: "mnasnet1_3",
        description: "MNASNet 1.3 (Tan et al., 2019), torchvision mnasnet1_3",
        build: edge::mnasnet1_3,
    },
];

/// ` (did you mean NAME?)` for a name near a zoo model's, or nothing.
fn near_miss(name: &str) -> String {
    crate::text::nearest(name, zoo_names())
        .map_or(String::new(), |n| format!(" (did you mean {n}?)"))
}

#[derive(Debug, Error, PartialEq)]
pub enum ZooError {
    #[error("unknown model {name:?}{}; the zoo has {}", near_miss(name), zoo_names().join(", "))]
    UnknownModel { name: String },
    #[error("{what} must be between {min} and {max}, got {value}")]
    OutOfRange {
        what: &'static str,
        value: usize,
        min: usize,
        max: usize,
    },
    #[error("building {model} failed at {source}")]
    Graph {
        model: String,
        #[source]
        source: GraphError,
    },
}

pub fn zoo_names() -> Vec<&'static str> {
    ZOO.iter().map(|e| e.name).collect()
}

pub fn find(name: &str) -> Option<&'static ZooEntry> {
    ZOO.iter().find(|e| e.name == name)
}

fn check_range(what: &'static str, value: usize, min: usize, max: usize) -> Result<(), ZooError> {
    if value < min || value > max {
        return Err(ZooError::OutOfRange {
            what,
            value,
            min,
            max,
        });
    }
    Ok(())
}

/// Builds a zoo model by name for the given parameters.
pub fn build(name: &str, params: &ModelParams) -> Result<Model, ZooError> {
    let entry = find(name).ok_or_else(|| ZooError::UnknownModel {
        name: name.to_string(),
    })?;
    check_range("input height", params.height, MIN_SPATIAL, MAX_SPATIAL)?;
    check_range("input width", params.width, MIN_SPATIAL, MAX_SPATIAL)?;
    check_range("input channels", params.channels, 1, MAX_CHANNELS)?;
    check_range("batch size", params.batch, 1, MAX_BATCH)?;
    check_range("number of classes", params.num_classes, 1, 1_000_000)?;
    let mut g = GraphBuilder::new(
        entry.name,
        [params.batch, params.channels, params.height, params.width],
    );
    (entry.build)(&mut g, params.num_classes).map_err(|source| ZooError::Graph {
        model: entry.name.to_string(),
        source,
    })?;
    Ok(g.finish())
}

/// Conv → BatchNorm → activation, named `{prefix}.0/.1/.2` as torchvision's Sequential blocks.
#[allow(clippy::too_many_arguments)]
fn conv_bn_act(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    out: usize,
    kernel: usize,
    stride: usize,
    groups: usize,
    act: Option<Op>,
) -> Result<ValueId, GraphError> {
    let eps = super::weights::BN_EPSILON;
    conv_bn_eps(g, prefix, x, out, kernel, stride, groups, eps, act)
}

/// [`conv_bn_act`] with the batch norm's own epsilon.
#[allow(clippy::too_many_arguments)]
fn conv_bn_eps(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    out: usize,
    kernel: usize,
    stride: usize,
    groups: usize,
    eps: f32,
    act: Option<Op>,
) -> Result<ValueId, GraphError> {
    let x = g.conv(
        &format!("{prefix}.0"),
        x,
        out,
        kernel,
        stride,
        (kernel - 1) / 2,
        groups,
        false,
    )?;
    let channels = g.channels(x);
    let x = g.add(
        &format!("{prefix}.1"),
        Op::BatchNorm2d { channels, eps },
        &[x],
    )?;
    match act {
        Some(op) => g.add(&format!("{prefix}.2"), op, &[x]),
        None => Ok(x),
    }
}

// ---------------------------------------------------------------- ShuffleNetV2

fn shuffle_unit(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    out: usize,
    stride: usize,
) -> Result<ValueId, GraphError> {
    let inp = g.channels(x);
    let branch = out / 2;
    let (left, right_in) = if stride > 1 {
        let b1 = format!("{prefix}.branch1");
        let y = g.conv(&format!("{b1}.0"), x, inp, 3, stride, 1, inp, false)?;
        let y = g.batch_norm(&format!("{b1}.1"), y)?;
        let y = g.conv(&format!("{b1}.2"), y, branch, 1, 1, 0, 1, false)?;
        let y = g.batch_norm(&format!("{b1}.3"), y)?;
        let left = g.relu(&format!("{b1}.4"), y)?;
        (left, x)
    } else {
        let half = inp / 2;
        let x1 = g.add(
            &format!("{prefix}.chunk.0"),
            Op::ChannelSlice {
                start: 0,
                end: half,
            },
            &[x],
        )?;
        let x2 = g.add(
            &format!("{prefix}.chunk.1"),
            Op::ChannelSlice {
                start: half,
                end: inp,
            },
            &[x],
        )?;
        (x1, x2)
    };
    let b2 = format!("{prefix}.branch2");
    let y = g.conv(&format!("{b2}.0"), right_in, branch, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{b2}.1"), y)?;
    let y = g.relu(&format!("{b2}.2"), y)?;
    let y = g.conv(&format!("{b2}.3"), y, branch, 3, stride, 1, branch, false)?;
    let y = g.batch_norm(&format!("{b2}.4"), y)?;
    let y = g.conv(&format!("{b2}.5"), y, branch, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{b2}.6"), y)?;
    let right = g.relu(&format!("{b2}.7"), y)?;
    let cat = g.add(&format!("{prefix}.cat"), Op::Concat, &[left, right])?;
    g.add(
        &format!("{prefix}.shuffle"),
        Op::ChannelShuffle { groups: 2 },
        &[cat],
    )
}

/// ShuffleNetV2 with torchvision's `stages_out_channels` for each width.
fn shufflenet_v2(
    g: &mut GraphBuilder,
    classes: usize,
    channels: [usize; 5],
) -> Result<(), GraphError> {
    let repeats = [4, 8, 4];
    let x = conv_bn_act(
        g,
        "conv1",
        ValueId::Input,
        channels[0],
        3,
        2,
        1,
        Some(Op::Relu),
    )?;
    let mut x = g.max_pool("maxpool", x, 3, 2, 1)?;
    for (stage, (&n, &out)) in repeats.iter().zip(&channels[1..4]).enumerate() {
        let name = format!("stage{}", stage + 2);
        for i in 0..n {
            let stride = if i == 0 { 2 } else { 1 };
            x = shuffle_unit(g, &format!("{name}.{i}"), x, out, stride)?;
        }
    }
    let x = conv_bn_act(g, "conv5", x, channels[4], 1, 1, 1, Some(Op::Relu))?;
    // torchvision: x.mean([2, 3])
    let x = g.add("mean", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    g.linear("fc", x, classes)?;
    Ok(())
}

fn shufflenet_v2_x0_5(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    shufflenet_v2(g, classes, [24, 48, 96, 192, 1024])
}

fn shufflenet_v2_x1_0(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    shufflenet_v2(g, classes, [24, 116, 232, 464, 1024])
}

fn shufflenet_v2_x1_5(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    shufflenet_v2(g, classes, [24, 176, 352, 704, 1024])
}

fn shufflenet_v2_x2_0(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    shufflenet_v2(g, classes, [24, 244, 488, 976, 2048])
}

// ---------------------------------------------------------------- MobileNetV2

fn mobilenet_v2(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    // (expansion t, output channels c, repeats n, first stride s), width multiplier 1.0.
    let settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let mut x = conv_bn_act(
        g,
        "features.0",
        ValueId::Input,
        32,
        3,
        2,
        1,
        Some(Op::Relu6),
    )?;
    let mut index = 1;
    for (t, c, n, s) in settings {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let prefix = format!("features.{index}");
            let inp = g.channels(x);
            let hidden = inp * t;
            let mut y = x;
            let mut part = 0;
            if t != 1 {
                y = conv_bn_act(
                    g,
                    &format!("{prefix}.conv.{part}"),
                    y,
                    hidden,
                    1,
                    1,
                    1,
                    Some(Op::Relu6),
                )?;
                part += 1;
            }
            y = conv_bn_act(
                g,
                &format!("{prefix}.conv.{part}"),
                y,
                hidden,
                3,
                stride,
                hidden,
                Some(Op::Relu6),
            )?;
            y = g.conv(
                &format!("{prefix}.conv.{}", part + 1),
                y,
                c,
                1,
                1,
                0,
                1,
                false,
            )?;
            y = g.batch_norm(&format!("{prefix}.conv.{}", part + 2), y)?;
            if stride == 1 && inp == c {
                y = g.add(&format!("{prefix}.add"), Op::Add, &[x, y])?;
            }
            x = y;
            index += 1;
        }
    }
    let x = conv_bn_act(
        g,
        &format!("features.{index}"),
        x,
        1280,
        1,
        1,
        1,
        Some(Op::Relu6),
    )?;
    let x = g.add("avgpool", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    let x = g.add("classifier.0", Op::Dropout { p: 0.2 }, &[x])?;
    g.linear("classifier.1", x, classes)?;
    Ok(())
}

// ---------------------------------------------------------------- ResNet

/// Conv 7×7/2, BN, ReLU, max-pool 3×3/2: the ResNet stem.
fn resnet_stem(g: &mut GraphBuilder) -> Result<ValueId, GraphError> {
    let x = g.conv("conv1", ValueId::Input, 64, 7, 2, 3, 1, false)?;
    let x = g.batch_norm("bn1", x)?;
    let x = g.relu("relu", x)?;
    g.max_pool("maxpool", x, 3, 2, 1)
}

/// The 1×1 projection on the shortcut when the block changes shape.
fn downsample(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    out: usize,
    stride: usize,
) -> Result<ValueId, GraphError> {
    if stride == 1 && g.channels(x) == out {
        return Ok(x);
    }
    let y = g.conv(
        &format!("{prefix}.downsample.0"),
        x,
        out,
        1,
        stride,
        0,
        1,
        false,
    )?;
    g.batch_norm(&format!("{prefix}.downsample.1"), y)
}

fn basic_block(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    planes: usize,
    stride: usize,
) -> Result<ValueId, GraphError> {
    let y = g.conv(
        &format!("{prefix}.conv1"),
        x,
        planes,
        3,
        stride,
        1,
        1,
        false,
    )?;
    let y = g.batch_norm(&format!("{prefix}.bn1"), y)?;
    let y = g.relu(&format!("{prefix}.relu"), y)?;
    let y = g.conv(&format!("{prefix}.conv2"), y, planes, 3, 1, 1, 1, false)?;
    let y = g.batch_norm(&format!("{prefix}.bn2"), y)?;
    let identity = downsample(g, prefix, x, planes, stride)?;
    let y = g.add(&format!("{prefix}.add"), Op::Add, &[y, identity])?;
    g.relu(&format!("{prefix}.relu_1"), y)
}

fn bottleneck(
    g: &mut GraphBuilder,
    prefix: &str,
    x: ValueId,
    planes: usize,
    stride: usize,
) -> Result<ValueId, GraphError> {
    let out = planes * 4;
    let y = g.conv(&format!("{prefix}.conv1"), x, planes, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{prefix}.bn1"), y)?;
    let y = g.relu(&format!("{prefix}.relu"), y)?;
    let y = g.conv(
        &format!("{prefix}.conv2"),
        y,
        planes,
        3,
        stride,
        1,
        1,
        false,
    )?;
    let y = g.batch_norm(&format!("{prefix}.bn2"), y)?;
    let y = g.relu(&format!("{prefix}.relu_1"), y)?;
    let y = g.conv(&format!("{prefix}.conv3"), y, out, 1, 1, 0, 1, false)?;
    let y = g.batch_norm(&format!("{prefix}.bn3"), y)?;
    let identity = downsample(g, prefix, x, out, stride)?;
    let y = g.add(&format!("{prefix}.add"), Op::Add, &[y, identity])?;
    g.relu(&format!("{prefix}.relu_2"), y)
}

type Block = fn(&mut GraphBuilder, &str, ValueId, usize, usize) -> Result<ValueId, GraphError>;

fn resnet(
    g: &mut GraphBuilder,
    classes: usize,
    block: Block,
    blocks: [usize; 4],
) -> Result<(), GraphError> {
    let mut x = resnet_stem(g)?;
    for (stage, &n) in blocks.iter().enumerate() {
        let planes = 64 << stage;
        for i in 0..n {
            let stride = if i == 0 && stage > 0 { 2 } else { 1 };
            x = block(g, &format!("layer{}.{i}", stage + 1), x, planes, stride)?;
        }
    }
    let x = g.add("avgpool", Op::AdaptiveAvgPool2d { output: [1, 1] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    g.linear("fc", x, classes)?;
    Ok(())
}

fn resnet34(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    resnet(g, classes, basic_block, [3, 4, 6, 3])
}

fn resnet50(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    resnet(g, classes, bottleneck, [3, 4, 6, 3])
}

// ---------------------------------------------------------------- VGG

fn vgg19(g: &mut GraphBuilder, classes: usize) -> Result<(), GraphError> {
    // Configuration "E"; 0 marks a 2×2/2 max-pool.
    const CFG: [usize; 21] = [
        64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0,
    ];
    let mut x = ValueId::Input;
    let mut index = 0;
    for &v in &CFG {
        if v == 0 {
            x = g.max_pool(&format!("features.{index}"), x, 2, 2, 0)?;
            index += 1;
        } else {
            x = g.conv(&format!("features.{index}"), x, v, 3, 1, 1, 1, true)?;
            x = g.relu(&format!("features.{}", index + 1), x)?;
            index += 2;
        }
    }
    let x = g.add("avgpool", Op::AdaptiveAvgPool2d { output: [7, 7] }, &[x])?;
    let x = g.add("flatten", Op::Flatten, &[x])?;
    let x = g.linear("classifier.0", x, 4096)?;
    let x = g.relu("classifier.1", x)?;
    let x = g.add("classifier.2", Op::Dropout { p: 0.5 }, &[x])?;
    let x = g.linear("classifier.3", x, 4096)?;
    let x = g.relu("classifier.4", x)?;
    let x = g.add("classifier.5", Op::Dropout { p: 0.5 }, &[x])?;
    g.linear("classifier.6", x, classes)?;
    Ok(())
}

crate::error::kinds!(crate::error::Kind::BadInput => ZooError);

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str, hw: usize) -> Model {
        let params = ModelParams {
            height: hw,
            width: hw,
            ..ModelParams::default()
        };
        match build(name, &params) {
            Ok(m) => m,
            Err(e) => panic!("{name} at {hw}: {e}"),
        }
    }

    #[test]
    fn every_model_builds_from_32_upwards_with_odd_sizes() {
        for entry in ZOO {
            for hw in [32, 33, 57, 128, 224] {
                let m = model(entry.name, hw);
                assert_eq!(m.output_shape(), &[1, 1000]);
            }
        }
    }

    #[test]
    fn vgg19_feature_map_sizes_before_adaptive_pool() {
        for (hw, fm) in [(32, 1), (128, 4), (224, 7), (256, 8)] {
            let m = model("vgg19", hw);
            let pool = m.layers.iter().find(|l| l.name == "avgpool");
            let Some(pool) = pool else {
                panic!("no avgpool")
            };
            assert_eq!(m.shape_of(pool.inputs[0]), &[1, 512, fm, fm]);
            assert_eq!(pool.output_shape, vec![1, 512, 7, 7]);
        }
    }

    #[test]
    fn layer_names_follow_torchvision_modules() {
        let m = model("resnet50", 224);
        let names: Vec<&str> = m.layers.iter().map(|l| l.name.as_str()).collect();
        for expected in ["conv1", "layer1.0.downsample.0", "layer4.2.conv3", "fc"] {
            assert!(names.contains(&expected), "{expected} missing");
        }
        let m = model("mobilenet_v2", 224);
        let names: Vec<&str> = m.layers.iter().map(|l| l.name.as_str()).collect();
        for expected in [
            "features.0.0",
            "features.1.conv.0.0",
            "features.1.conv.1",
            "features.18.0",
            "classifier.1",
        ] {
            assert!(names.contains(&expected), "{expected} missing");
        }
        let m = model("shufflenet_v2_x0_5", 224);
        let names: Vec<&str> = m.layers.iter().map(|l| l.name.as_str()).collect();
        for expected in [
            "conv1.0",
            "stage2.0.branch1.0",
            "stage4.3.branch2.7",
            "conv5.0",
            "fc",
        ] {
            assert!(names.contains(&expected), "{expected} missing");
        }
    }

    #[test]
    fn rejects_unknown_names_and_bad_sizes() {
        let params = ModelParams::default();
        assert!(matches!(
            build("resnet51", &params),
            Err(ZooError::UnknownModel { .. })
        ));
        let small = ModelParams {
            height: 31,
            ..params
        };
        assert!(matches!(
            build("resnet50", &small),
            Err(ZooError::OutOfRange { .. })
        ));
    }
}
