//! The A, B and C evaluations on the device: a recorded constraint system kept on the GPU
//! beside the parameters, and its products with a witness (`kernels/r1cs.cu`), written straight
//! into the buffers the H transforms work on. No a, b or c crosses PCIe or lives on the host.

use anyhow::{ensure, Result};

use super::device::{DevBuf, Gpu, Lane};
use super::limbs::{scalars_as_limbs, FR_LIMBS};
use crate::groth16::R1cs;

const BLOCK: u32 = 256;

/// One matrix on the device.
struct DeviceMatrix {
    ends: DevBuf<u32>,
    terms: DevBuf<u32>,
    rows: usize,
}

/// A circuit's recorded constraints on the device.
pub struct DeviceR1cs {
    /// The circuit id they were recorded for.
    pub id: String,
    pub inputs: usize,
    pub aux: usize,
    pub rows: usize,
    matrices: [DeviceMatrix; 3],
    coeffs: DevBuf<u32>,
}

impl DeviceR1cs {
    /// Device bytes `r1cs` takes once uploaded.
    pub fn bytes_for(r1cs: &R1cs) -> usize {
        let m =
            |m: &crate::groth16::r1cs::SparseMatrix| (m.ends().len() + m.term_words().len()) * 4;
        m(&r1cs.a) + m(&r1cs.b) + m(&r1cs.c) + r1cs.coefficients().len() * FR_LIMBS * 4
    }

    pub fn upload(gpu: &Gpu, r1cs: &R1cs) -> Result<DeviceR1cs> {
        let matrix = |m: &crate::groth16::r1cs::SparseMatrix| -> Result<DeviceMatrix> {
            let ends = gpu.alloc::<u32>(m.ends().len())?;
            gpu.upload(&ends, 0, m.ends())?;
            let terms = gpu.alloc::<u32>(m.term_words().len())?;
            gpu.upload(&terms, 0, m.term_words())?;
            Ok(DeviceMatrix {
                ends,
                terms,
                rows: m.rows(),
            })
        };
        let coeffs = gpu.alloc::<u32>(r1cs.coefficients().len() * FR_LIMBS)?;
        gpu.upload(&coeffs, 0, scalars_as_limbs(r1cs.coefficients()))?;
        let uploaded = DeviceR1cs {
            id: r1cs.circuit_id.clone(),
            inputs: r1cs.inputs,
            aux: r1cs.aux,
            rows: r1cs.constraints(),
            matrices: [matrix(&r1cs.a)?, matrix(&r1cs.b)?, matrix(&r1cs.c)?],
            coeffs,
        };
        gpu.sync_lane(Lane::Main)?;
        Ok(uploaded)
    }

    pub fn bytes(&self) -> usize {
        self.matrices
            .iter()
            .map(|m| m.ends.bytes() + m.terms.bytes())
            .sum::<usize>()
            + self.coeffs.bytes()
    }

    /// Queue matrix `which` (0 = A, 1 = B, 2 = C) times the witness (`aux` and `inputs`, device
    /// scalars) into `out`, `domain` scalars, zero past the last row. On the main lane.
    pub fn product(
        &self,
        gpu: &Gpu,
        which: usize,
        aux: &DevBuf<u32>,
        inputs: &DevBuf<u32>,
        out: &DevBuf<u32>,
        domain: usize,
    ) -> Result<()> {
        let m = &self.matrices[which.min(2)];
        ensure!(
            domain >= m.rows
                && out.len() >= domain * FR_LIMBS
                && aux.len() >= self.aux * FR_LIMBS
                && inputs.len() >= self.inputs * FR_LIMBS
                && u32::try_from(domain).is_ok(),
            "device products: buffers do not fit the recorded constraints"
        );
        let (rows, domain32) = (m.rows as u32, domain as u32);
        gpu.launch(
            "r1cs_rows",
            domain32.div_ceil(BLOCK),
            BLOCK,
            &[
                &m.ends.ptr(),
                &m.terms.ptr(),
                &rows,
                &domain32,
                &self.coeffs.ptr(),
                &aux.ptr(),
                &inputs.ptr(),
                &out.ptr(),
            ],
        )
    }
}
