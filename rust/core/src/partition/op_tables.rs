//! The op tables behind [`super::rules`]: one sorted table per question,
//! keyed by op packet name (`str(OpOverloadPacket)`, e.g. `"aten.mm"`) or, for
//! Python callables, by `"<module>.<qualname>"` (e.g. `"_operator.getitem"`).
//!
//! Derived from torch 2.15's `torch._functorch.partitioners.get_default_op_list()`
//! (its recomputable allowlist includes every aten op tagged
//! `torch.Tag.pointwise`). Every table is sorted (byte order) so lookups are
//! binary searches; a unit test keeps them sorted.

/// Cheap ops that the min-cut partitioner may recompute in the backward.
#[rustfmt::skip]
pub const RECOMPUTABLE: &[&str] = &[
    "_operator.abs", "_operator.add", "_operator.and_", "_operator.eq", "_operator.floordiv",
    "_operator.ge", "_operator.getitem", "_operator.gt", "_operator.le", "_operator.lshift",
    "_operator.lt", "_operator.mod", "_operator.mul", "_operator.ne", "_operator.neg",
    "_operator.or_", "_operator.pos", "_operator.pow", "_operator.rshift", "_operator.sub",
    "_operator.truediv", "_operator.xor", "aten.__and__", "aten.__ilshift__", "aten.__ixor__",
    "aten.__lshift__", "aten.__or__", "aten.__rshift__", "aten.__xor__", "aten._grad_sum_to_size",
    "aten._to_copy", "aten._unsafe_view", "aten.abs", "aten.acos", "aten.acos_", "aten.acosh",
    "aten.acosh_", "aten.add", "aten.add_", "aten.addcdiv", "aten.addcdiv_", "aten.addcmul",
    "aten.addcmul_", "aten.alias", "aten.amax", "aten.angle", "aten.any", "aten.arange",
    "aten.argmax", "aten.as_strided", "aten.asin", "aten.asin_", "aten.asinh", "aten.asinh_",
    "aten.atan", "aten.atan2", "aten.atan2_", "aten.atan_", "aten.atanh", "aten.atanh_",
    "aten.bitwise_and", "aten.bitwise_and_", "aten.bitwise_left_shift", "aten.bitwise_left_shift_",
    "aten.bitwise_not", "aten.bitwise_not_", "aten.bitwise_or", "aten.bitwise_or_",
    "aten.bitwise_right_shift", "aten.bitwise_right_shift_", "aten.bitwise_xor",
    "aten.bitwise_xor_", "aten.broadcast_tensors", "aten.ceil", "aten.ceil_", "aten.celu",
    "aten.celu_", "aten.clamp", "aten.clamp_", "aten.clamp_max", "aten.clamp_max_",
    "aten.clamp_min", "aten.clamp_min_", "aten.clip", "aten.clip_", "aten.clone",
    "aten.conj_physical", "aten.conj_physical_", "aten.copysign", "aten.cos", "aten.cos_",
    "aten.cosh", "aten.cosh_", "aten.deg2rad", "aten.deg2rad_", "aten.digamma", "aten.digamma_",
    "aten.div", "aten.div_", "aten.elu", "aten.elu_", "aten.empty", "aten.empty_like", "aten.eq",
    "aten.equal", "aten.erf", "aten.erf_", "aten.erfc", "aten.erfc_", "aten.erfinv",
    "aten.erfinv_", "aten.exp", "aten.exp2", "aten.exp2_", "aten.exp_", "aten.expand",
    "aten.expm1", "aten.expm1_", "aten.float_power", "aten.float_power_", "aten.floor",
    "aten.floor_", "aten.fmax", "aten.fmin", "aten.fmod", "aten.fmod_", "aten.frac", "aten.frac_",
    "aten.frexp", "aten.full", "aten.full_like", "aten.gather", "aten.gcd", "aten.ge", "aten.gelu",
    "aten.gelu_backward", "aten.gt", "aten.hardshrink", "aten.hardsigmoid", "aten.hardsigmoid_",
    "aten.hardtanh", "aten.hardtanh_", "aten.heaviside", "aten.hypot", "aten.hypot_", "aten.i0",
    "aten.i0_", "aten.igamma", "aten.igamma_", "aten.igammac", "aten.igammac_", "aten.index",
    "aten.isfinite", "aten.isinf", "aten.isnan", "aten.isneginf", "aten.isposinf", "aten.lcm",
    "aten.ldexp", "aten.ldexp_", "aten.le", "aten.leaky_relu", "aten.leaky_relu_", "aten.lerp",
    "aten.lerp_", "aten.lgamma", "aten.lgamma_", "aten.lift_fresh_copy", "aten.log", "aten.log10",
    "aten.log10_", "aten.log1p", "aten.log1p_", "aten.log2", "aten.log2_", "aten.log_",
    "aten.logaddexp", "aten.logaddexp2", "aten.logical_and", "aten.logical_and_",
    "aten.logical_not", "aten.logical_not_", "aten.logical_or", "aten.logical_or_",
    "aten.logical_xor", "aten.logical_xor_", "aten.logit", "aten.logit_", "aten.logit_backward",
    "aten.lt", "aten.masked_fill", "aten.max", "aten.maximum", "aten.mean", "aten.min",
    "aten.minimum", "aten.mish", "aten.mul", "aten.mul_", "aten.mvlgamma", "aten.mvlgamma_",
    "aten.nan_to_num", "aten.nan_to_num_", "aten.native_dropout_backward", "aten.ne", "aten.neg",
    "aten.neg_", "aten.new_zeros", "aten.nextafter", "aten.nextafter_", "aten.ones",
    "aten.permute", "aten.polygamma", "aten.polygamma_", "aten.positive", "aten.pow", "aten.pow_",
    "aten.rad2deg", "aten.rad2deg_", "aten.reciprocal", "aten.reciprocal_", "aten.relu",
    "aten.relu6", "aten.relu_", "aten.remainder", "aten.remainder_", "aten.reshape", "aten.round",
    "aten.round_", "aten.rrelu", "aten.rsqrt", "aten.rsqrt_", "aten.rsub", "aten.scalar_tensor",
    "aten.select", "aten.selu", "aten.selu_", "aten.sgn", "aten.sgn_", "aten.sigmoid",
    "aten.sigmoid_", "aten.sigmoid_backward", "aten.sign", "aten.sign_", "aten.signbit",
    "aten.silu", "aten.silu_", "aten.silu_backward", "aten.sin", "aten.sin_", "aten.sinc",
    "aten.sinc_", "aten.sinh", "aten.sinh_", "aten.slice", "aten.softplus", "aten.softshrink",
    "aten.special_airy_ai", "aten.special_bessel_j0", "aten.special_bessel_j1",
    "aten.special_bessel_y0", "aten.special_bessel_y1", "aten.special_chebyshev_polynomial_t",
    "aten.special_chebyshev_polynomial_u", "aten.special_chebyshev_polynomial_v",
    "aten.special_chebyshev_polynomial_w", "aten.special_entr", "aten.special_erfcx",
    "aten.special_hermite_polynomial_h", "aten.special_hermite_polynomial_he", "aten.special_i0e",
    "aten.special_i1", "aten.special_i1e", "aten.special_laguerre_polynomial_l",
    "aten.special_legendre_polynomial_p", "aten.special_log_ndtr",
    "aten.special_modified_bessel_i0", "aten.special_modified_bessel_i1",
    "aten.special_modified_bessel_k0", "aten.special_modified_bessel_k1", "aten.special_ndtri",
    "aten.special_scaled_modified_bessel_k0", "aten.special_scaled_modified_bessel_k1",
    "aten.special_shifted_chebyshev_polynomial_t", "aten.special_shifted_chebyshev_polynomial_u",
    "aten.special_shifted_chebyshev_polynomial_v", "aten.special_shifted_chebyshev_polynomial_w",
    "aten.special_spherical_bessel_j0", "aten.special_xlog1py", "aten.special_zeta", "aten.split",
    "aten.sqrt", "aten.sqrt_", "aten.square", "aten.square_", "aten.squeeze", "aten.std",
    "aten.sub", "aten.sub_", "aten.sum", "aten.sum_to_size", "aten.t", "aten.tan", "aten.tan_",
    "aten.tanh", "aten.tanh_", "aten.tanh_backward", "aten.threshold", "aten.threshold_backward",
    "aten.to", "aten.triu", "aten.true_divide", "aten.trunc", "aten.trunc_", "aten.type_as",
    "aten.unsqueeze", "aten.var", "aten.var_mean", "aten.view", "aten.where", "aten.xlogy",
    "aten.xlogy_", "aten.zeros", "aten.zeros_like", "builtins.round", "math.ceil", "math.floor",
    "math.trunc", "prims._low_memory_max_pool_offsets_to_indices", "prims.broadcast_in_dim",
    "prims.convert_element_type", "prims.div", "prims.iota", "prims.prepare_softmax_online",
    "prims.sum", "prims.var", "torch._sym_acos", "torch._sym_asin", "torch._sym_atan",
    "torch._sym_cos", "torch._sym_cosh", "torch._sym_log2", "torch._sym_sin", "torch._sym_sinh",
    "torch._sym_sqrt", "torch._sym_tan", "torch._sym_tanh", "torch.sym_float", "torch.sym_ite",
    "torch.sym_max", "torch.sym_min", "torch.sym_not",
];

/// Compute-intensive ops: never recomputed (matmul-like, convolution, attention).
#[rustfmt::skip]
pub const COMPUTE_INTENSIVE: &[&str] = &[
    "aten._efficient_attention_forward", "aten._flash_attention_forward",
    "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_mm", "aten.addmm", "aten.baddbmm", "aten.bmm", "aten.convolution",
    "aten.convolution_backward", "aten.matmul", "aten.mm", "aten.upsample_bilinear2d",
];

/// Random ops (in addition to nodes flagged `RANDOM`): never recomputed, but fusible.
#[rustfmt::skip]
pub const RANDOM: &[&str] = &["aten.native_dropout", "aten.rand_like", "aten.randn_like"];

/// View ops: never banned from recomputation by the min-cut heuristics.
#[rustfmt::skip]
pub const VIEW: &[&str] = &[
    "aten.alias", "aten.as_strided", "aten.expand", "aten.permute", "aten.select", "aten.slice",
    "aten.split", "aten.squeeze", "aten.t", "aten.unsqueeze", "aten.view", "prims.broadcast_in_dim",
];

/// Ops that a producer can always fuse into ("memory fusion": `cat` writes
/// its inputs in place), though they cannot be the producer of a fusion.
#[rustfmt::skip]
pub const FUSE_INTO: &[&str] = &["aten.cat"];

/// Ops that are free to recompute whatever the options say (`getitem` of a
/// tuple, lifting a constant).
#[rustfmt::skip]
pub const ALWAYS_RECOMPUTABLE: &[&str] = &[
    "_operator.getitem", "aten.lift_fresh", "aten.lift_fresh_copy",
];

/// Ops whose two calls with the same arguments give different results: the
/// random ops of torch's CSE pass (`rand_ops` in
/// `torch._functorch.compile_utils`, plus the `*_like` variants) and the ops
/// returning uninitialized memory. Never merged by [`crate::passes::cse`].
#[rustfmt::skip]
pub const NONDETERMINISTIC: &[&str] = &[
    "aten._fused_dropout", "aten._standard_gamma", "aten.bernoulli", "aten.binomial",
    "aten.dropout", "aten.empty", "aten.empty_like", "aten.empty_permuted", "aten.empty_strided",
    "aten.multinomial", "aten.native_dropout", "aten.new_empty", "aten.new_empty_strided",
    "aten.normal", "aten.poisson", "aten.rand", "aten.rand_like", "aten.randint",
    "aten.randint_like", "aten.randn", "aten.randn_like", "aten.randperm", "aten.rrelu",
];

/// Ops whose output may share storage with their first argument although
/// their schema does not say so (the schema's aliases are the `VIEW` flag):
/// an element of a tuple, and ops that return their input or a view of it
/// when they can. Read by [`crate::passes::cse`] to find the values that
/// share a graph output's storage.
#[rustfmt::skip]
pub const MAY_ALIAS: &[&str] = &[
    "_operator.getitem", "aten._unsafe_view", "aten.contiguous", "aten.detach", "aten.lift_fresh",
    "aten.reshape", "aten.to", "aten.view_as",
];
