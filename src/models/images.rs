//! Real photographs as model inputs: the sample images scikit-image and scikit-learn ship in
//! their wheels (`edgeprof env setup images` fetches the pinned wheels from PyPI and keeps the
//! images), decoded, resized and centre-cropped to a condition's input and normalised as
//! ImageNet models expect. A lower precision's accuracy against fp32 means more on photographs
//! than on noise, and its int8 calibration ranges come out as they would in the field.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A wheel the images come from, pinned so that every machine decodes the same pictures.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub distribution: &'static str,
    pub version: &'static str,
    /// The images' paths inside the wheel.
    pub members: &'static [&'static str],
}

/// The wheels and the images kept from them: photographs and micrographs, colour and grey
/// (synthetic test patterns, binary masks and logos left out).
pub const SOURCES: &[Source] = &[
    Source {
        distribution: "scikit-image",
        version: "0.24.0",
        members: &[
            "skimage/data/astronaut.png",
            "skimage/data/chelsea.png",
            "skimage/data/coffee.png",
            "skimage/data/rocket.jpg",
            "skimage/data/motorcycle_left.png",
            "skimage/data/motorcycle_right.png",
            "skimage/data/hubble_deep_field.jpg",
            "skimage/data/retina.jpg",
            "skimage/data/ihc.png",
            "skimage/data/camera.png",
            "skimage/data/moon.png",
            "skimage/data/coins.png",
            "skimage/data/grass.png",
            "skimage/data/gravel.png",
            "skimage/data/brick.png",
            "skimage/data/cell.png",
            "skimage/data/page.png",
            "skimage/data/text.png",
            "skimage/data/clock_motion.png",
        ],
    },
    Source {
        distribution: "scikit-learn",
        version: "1.5.2",
        members: &[
            "sklearn/datasets/images/china.jpg",
            "sklearn/datasets/images/flower.jpg",
        ],
    },
];

/// The manifest `edgeprof env setup images` writes beside the images.
pub const MANIFEST: &str = "images.json";

/// The per-channel mean and standard deviation of ImageNet's training images (RGB, in [0, 1]),
/// which torchvision's and most exported classifiers' preprocessing subtracts and divides by.
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// The fraction of the resized image the centre crop keeps (224 of 256, as ImageNet's
/// evaluation does).
const CROP: f64 = 0.875;

#[derive(Debug, Error)]
pub enum ImagesError {
    #[error("no sample images in {0} (`edgeprof env setup images` fetches them)")]
    NotSetUp(PathBuf),
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: String },
    #[error("{0} is not an image manifest edgeprof wrote: {1}")]
    BadManifest(PathBuf, String),
    #[error("{path} does not decode as an image: {error}")]
    Decode { path: PathBuf, error: String },
    #[error("a {0}-channel input is not an image (1 grey or 3 RGB channels are)")]
    NotAnImage(usize),
}

/// One kept image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its file name in the images folder.
    pub file: String,
    /// `scikit-image 0.24.0`.
    pub source: String,
    pub sha256: String,
}

/// The manifest: the images in the order inputs draw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub images: Vec<Entry>,
}

/// The images set up in a folder.
#[derive(Debug, Clone)]
pub struct ImageSet {
    dir: PathBuf,
    pub manifest: Manifest,
}

/// Whether an input of `channels` channels, `height` × `width`, is fed photographs.
pub fn fits(channels: usize, height: usize, width: usize) -> bool {
    matches!(channels, 1 | 3) && height >= 8 && width >= 8
}

impl ImageSet {
    /// The set in `dir`, checked: its manifest read and every image present.
    pub fn open(dir: &Path) -> Result<ImageSet, ImagesError> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ImagesError::NotSetUp(dir.to_path_buf()))
            }
            Err(e) => {
                return Err(ImagesError::Read {
                    path,
                    error: e.to_string(),
                })
            }
        };
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| ImagesError::BadManifest(path.clone(), e.to_string()))?;
        if manifest.images.is_empty() {
            return Err(ImagesError::BadManifest(path, "it lists no images".into()));
        }
        for e in &manifest.images {
            let file = dir.join(&e.file);
            if e.file.contains('/') || !file.is_file() {
                return Err(ImagesError::BadManifest(
                    path,
                    format!("{} is missing", e.file),
                ));
            }
        }
        Ok(ImageSet {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn len(&self) -> usize {
        self.manifest.images.len()
    }

    pub fn is_empty(&self) -> bool {
        self.manifest.images.is_empty()
    }

    /// The distributions the images come from, for the record: `scikit-image 0.24.0,
    /// scikit-learn 1.5.2`.
    pub fn sources(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for e in &self.manifest.images {
            if !seen.contains(&e.source.as_str()) {
                seen.push(&e.source);
            }
        }
        seen.join(", ")
    }

    /// Twelve hex digits naming this set of images (from their digests): inputs made from
    /// another set are kept apart.
    pub fn digest(&self) -> String {
        let all: String = self
            .manifest
            .images
            .iter()
            .map(|e| e.sha256.as_str())
            .collect();
        sha256(all.as_bytes())[..12].to_string()
    }

    /// Where a batch drawn with `seed` starts: seeds pick different pictures.
    pub fn start(&self, seed: u64) -> usize {
        (seed % self.len().max(1) as u64) as usize
    }

    /// A batch of `n` images from `start`, in words for the record.
    pub fn describe(&self, n: usize, start: usize) -> String {
        let mut names: Vec<&str> = (0..n.min(3))
            .map(|k| self.manifest.images[self.index(start, k)].file.as_str())
            .collect();
        if n > 3 {
            names.push("…");
        }
        format!(
            "{n} photograph{} ({}) from {}, resized, centre-cropped and normalised with \
             ImageNet's mean and deviation",
            if n == 1 { "" } else { "s" },
            names.join(", "),
            self.sources()
        )
    }

    /// The index of the image that a batch starting at `start` feeds at position `k`: the
    /// images in turn, round again when a batch is larger than the set.
    pub fn index(&self, start: usize, k: usize) -> usize {
        (start + k) % self.len()
    }

    /// A batch of `shape` = [N, C, H, W] (C 1 or 3), images `start`, `start + 1`, … in turn,
    /// as float32 in NCHW order.
    pub fn batch(&self, shape: [usize; 4], start: usize) -> Result<Vec<f32>, ImagesError> {
        let [n, c, h, w] = shape;
        if !matches!(c, 1 | 3) {
            return Err(ImagesError::NotAnImage(c));
        }
        let mut out = Vec::with_capacity(n * c * h * w);
        for k in 0..n {
            let entry = &self.manifest.images[self.index(start, k)];
            let path = self.dir.join(&entry.file);
            let bytes = std::fs::read(&path).map_err(|e| ImagesError::Read {
                path: path.clone(),
                error: e.to_string(),
            })?;
            let decoded = image::load_from_memory(&bytes).map_err(|e| ImagesError::Decode {
                path,
                error: e.to_string(),
            })?;
            out.extend(preprocess(&decoded, c, h, w));
        }
        Ok(out)
    }
}

/// An image as one input of `c` × `h` × `w`: resized (triangle filter) so that the crop keeps
/// 87.5 % of it along its tighter side, centre-cropped, scaled to [0, 1] and normalised by
/// ImageNet's mean and deviation (grey: their averages), channel by channel.
fn preprocess(img: &image::DynamicImage, c: usize, h: usize, w: usize) -> Vec<f32> {
    let (iw, ih) = (
        f64::from(img.width().max(1)),
        f64::from(img.height().max(1)),
    );
    let scale = (h as f64 / ih).max(w as f64 / iw) / CROP;
    let rw = ((iw * scale).ceil() as u32).max(w as u32);
    let rh = ((ih * scale).ceil() as u32).max(h as u32);
    let resized = img.resize_exact(rw, rh, image::imageops::FilterType::Triangle);
    let x0 = (rw - w as u32) / 2;
    let y0 = (rh - h as u32) / 2;
    let cropped = resized.crop_imm(x0, y0, w as u32, h as u32);
    let mut out = vec![0.0f32; c * h * w];
    if c == 3 {
        let rgb = cropped.to_rgb8();
        for (x, y, p) in rgb.enumerate_pixels() {
            for ch in 0..3 {
                let v = f32::from(p.0[ch]) / 255.0;
                out[ch * h * w + y as usize * w + x as usize] = (v - MEAN[ch]) / STD[ch];
            }
        }
    } else {
        let mean = MEAN.iter().sum::<f32>() / 3.0;
        let std = STD.iter().sum::<f32>() / 3.0;
        let grey = cropped.to_luma8();
        for (x, y, p) in grey.enumerate_pixels() {
            out[y as usize * w + x as usize] = (f32::from(p.0[0]) / 255.0 - mean) / std;
        }
    }
    out
}

/// The hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    type Outcome = Result<(), Box<dyn std::error::Error>>;

    /// A set of two small PNGs: a red-to-black gradient 40×20 and a grey 10×30.
    fn set(dir: &Path) -> Result<ImageSet, Box<dyn std::error::Error>> {
        let wide = image::RgbImage::from_fn(40, 20, |x, _| image::Rgb([(x * 6) as u8, 0, 0]));
        wide.save(dir.join("wide.png"))?;
        let tall = image::GrayImage::from_pixel(10, 30, image::Luma([128]));
        tall.save(dir.join("tall.png"))?;
        let entry = |file: &str| Entry {
            file: file.into(),
            source: "test".into(),
            sha256: String::new(),
        };
        let manifest = Manifest {
            images: vec![entry("wide.png"), entry("tall.png")],
        };
        std::fs::write(dir.join(MANIFEST), serde_json::to_string(&manifest)?)?;
        Ok(ImageSet::open(dir)?)
    }

    #[test]
    fn a_batch_draws_the_images_in_turn_normalised_like_imagenet() -> Outcome {
        let dir = tempfile::tempdir()?;
        let s = set(dir.path())?;
        // Three images from the second: tall, wide, tall.
        let v = s.batch([3, 3, 8, 8], 1)?;
        assert_eq!(v.len(), 3 * 3 * 64);
        // The grey 128 picture: every channel (128/255 − mean) / std.
        let red = (128.0 / 255.0 - MEAN[0]) / STD[0];
        assert!((v[0] - red).abs() < 1e-3, "{}", v[0]);
        // The gradient has no green: the green plane is all (0 − mean) / std.
        let green = &v[192 + 64..192 + 128];
        assert!(green.iter().all(|g| (g - (-MEAN[1] / STD[1])).abs() < 1e-6));
        // Its red plane rises from left to right across the centre crop.
        let row = &v[192..192 + 8];
        assert!(row.windows(2).all(|p| p[1] > p[0]), "{row:?}");
        Ok(())
    }

    #[test]
    fn a_grey_input_averages_the_channels_statistics() -> Outcome {
        let dir = tempfile::tempdir()?;
        let s = set(dir.path())?;
        let v = s.batch([1, 1, 16, 16], 1)?;
        let expect =
            (128.0 / 255.0 - MEAN.iter().sum::<f32>() / 3.0) / (STD.iter().sum::<f32>() / 3.0);
        assert!(v.iter().all(|x| (x - expect).abs() < 1e-3));
        Ok(())
    }

    #[test]
    fn an_input_that_is_no_image_and_a_missing_set_are_refused() -> Outcome {
        let dir = tempfile::tempdir()?;
        assert!(matches!(
            ImageSet::open(dir.path()),
            Err(ImagesError::NotSetUp(_))
        ));
        let s = set(dir.path())?;
        assert!(matches!(
            s.batch([1, 4, 8, 8], 0),
            Err(ImagesError::NotAnImage(4))
        ));
        std::fs::remove_file(dir.path().join("tall.png"))?;
        let Err(e) = ImageSet::open(dir.path()) else {
            panic!("a missing image passed");
        };
        assert!(e.to_string().ends_with("tall.png is missing"), "{e}");
        Ok(())
    }

    #[test]
    fn a_batch_is_described_by_its_pictures_and_their_sources() -> Outcome {
        let dir = tempfile::tempdir()?;
        let s = set(dir.path())?;
        assert_eq!(s.start(3), 1);
        assert_eq!(
            s.describe(1, 1),
            "1 photograph (tall.png) from test, resized, centre-cropped and normalised with \
             ImageNet's mean and deviation"
        );
        assert!(s
            .describe(5, 0)
            .starts_with("5 photographs (wide.png, tall.png, wide.png, …)"));
        Ok(())
    }
}
