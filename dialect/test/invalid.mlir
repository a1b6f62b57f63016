// RUN: staticify-mlir-opt %s -split-input-file -verify-diagnostics

func.func @negative(%n: index) -> index {
  // expected-error @+1 {{upper bound must be non-negative, got -1}}
  %k = staticify.bound %n max -1 : index
  return %k : index
}

// -----

func.func @too_wide(%n: i8) -> i8 {
  // expected-error @+1 {{upper bound 128 does not fit in 'i8'}}
  %k = staticify.bound %n max 128 : i8
  return %k : i8
}

// -----

func.func @float(%x: f32) -> f32 {
  // expected-error @+1 {{must be signless integer or index}}
  %k = staticify.bound %x max 1 : f32
  return %k : f32
}

// -----

func.func @types_differ(%n: i64) -> i32 {
  // expected-error @+1 {{all of {input, result} have same type}}
  %k = "staticify.bound"(%n) {upper = 4 : i64} : (i64) -> i32
  return %k : i32
}

// -----

func.func @topk_matrix(%keys: tensor<4x4xf32>, %k: index) {
  // expected-error @+1 {{takes and gives vectors (rank 1)}}
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<4x4xf32> -> tensor<?xf32>, tensor<?xi64>
  return
}

// -----

func.func @topk_value_type(%keys: tensor<?xf32>, %k: index) {
  // expected-error @+1 {{values must have the keys' element type}}
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xf32> -> tensor<?xf64>, tensor<?xi64>
  return
}

// -----

func.func @topk_too_many(%keys: tensor<4xf32>, %k: index) {
  // expected-error @+1 {{k (5) exceeds the keys' size (4)}}
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<4xf32> -> tensor<5xf32>, tensor<5xi64>
  return
}

// -----

func.func @topk_i32_keys(%keys: tensor<?xi32>, %k: index) {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 64-bit float or 64-bit signless integer values}}
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xi32> -> tensor<?xi32>, tensor<?xi64>
  return
}

// -----

func.func @randperm_negative(%seed: i64) {
  %n = arith.constant -2 : index
  // expected-error @+1 {{n must be non-negative, got -2}}
  %p = staticify.randperm %n, %seed : tensor<?xi64>
  return
}

// -----

func.func @randperm_size(%seed: i64) {
  %n = arith.constant 3 : index
  // expected-error @+1 {{result of size 4 for n = 3}}
  %p = staticify.randperm %n, %seed : tensor<4xi64>
  return
}

// -----

func.func @scatter_dtype(%d: tensor<?xf32>, %i: tensor<?xi64>, %s: tensor<?xf64>) {
  // expected-error @+1 {{src's element type 'f64' differs from dest's 'f32'}}
  %r = staticify.scatter %d, %i, %s : tensor<?xf32>, tensor<?xi64>, tensor<?xf64>
  return
}

// -----

func.func @scatter_count(%d: tensor<?xf32>, %i: tensor<4xi64>, %s: tensor<3xf32>) {
  // expected-error @+1 {{more indices (4) than src elements (3)}}
  %r = staticify.scatter %d, %i, %s : tensor<?xf32>, tensor<4xi64>, tensor<3xf32>
  return
}
