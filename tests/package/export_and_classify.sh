# Sourced by consumer_build.sh and components.sh: a tiny dark/light image_folder run trained,
# exported and predicted by an installed host, then the installed infer_classify template built
# and run on the same files, its answers equal to host predict's (same_predictions.py).
# eval.batch_size covers every file, so host predict runs them as one batch, as the template
# programs do (a batch's size can change a float's last bit, docs/deployment.md).

# train_export_predict HOST DIR NAME EPOCHS TRAIN_PER_CLASS VAL_PER_CLASS: DIR/model.safetensors,
# DIR/images.txt (the val files) and DIR/predict.csv (host predict --images of them). Needs
# $python and $here.
train_export_predict() {
  local host=$1 dir=$2 name=$3 epochs=$4
  "$python" "$here/dark_light_images.py" "$dir/train" "$5"
  "$python" "$here/dark_light_images.py" "$dir/val" "$6"
  cat >"$dir/run.toml" <<TOML
[run]
name = "$name"
seed = 1
device = "cpu"
[train]
epochs = $epochs
batch_size = 4
[eval]
batch_size = 32
[data]
num_workers = 1
[data.train]
component = "org.torchhost.image_folder"
root = "$dir/train"
val_root = "$dir/val"
resize = [32, 32]
mean = [0.5, 0.5, 0.5]
std = [0.25, 0.25, 0.25]
[model]
component = "org.torchhost.small_cnn"
num_classes = 2
image_size = 32
[loss]
component = "org.torchhost.cross_entropy"
TOML
  (cd "$dir" && env -u LD_LIBRARY_PATH -u TORCHHOST_PLUGIN_PATH "$host" train --config run.toml --output-dir run) \
    >"$dir/train.out" 2>&1 || { cat "$dir/train.out"; exit 1; }
  "$host" export --checkpoint "$dir/run/checkpoints/last.pt" --format safetensors --output "$dir/model.safetensors"
  find "$dir/val" -name '*.png' | sort >"$dir/images.txt"
  "$host" predict --config "$dir/run.toml" --output-dir "$dir/run" --checkpoint last --images "$dir/images.txt" \
    --output "$dir/predict.csv"
}

# classify_like_predict BUILD DIR: runs BUILD's classify and classify_c (infer_classify) on
# DIR/images.txt with DIR/model.safetensors into DIR/<program>.out and checks they equal
# DIR/predict.csv.
classify_like_predict() {
  local build=$1 dir=$2 images program
  mapfile -t images <"$dir/images.txt"
  for program in classify classify_c; do
    env -u LD_LIBRARY_PATH -u TORCHHOST_PLUGIN_PATH "$build/$program" "$dir/model.safetensors" \
      "${images[@]}" >"$dir/$program.out"
  done
  "$python" "$here/same_predictions.py" "$dir/predict.csv" "$dir/classify.out" "$dir/classify_c.out"
}
